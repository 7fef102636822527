package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/operation"
	"winpool.dev/agent/internal/report"
)

var errNodeGone = errors.New("the Node does not exist")

// errStaleReport: the report answered an attempt the Node no longer names
// (the operator started the node again, e.g. a retry of a failure, while the
// agent decided or worked); it was not written. The operator would not read
// it as an answer to the new start either (it matches startedAt).
var errStaleReport = errors.New("the report is for an earlier attempt")

// maxMessage bounds apply.message: a servicing error can carry a whole log.
const maxMessage = 1024

// reportState is the agent's WindowsNodeReport as the API holds it. The
// agent is its only writer, so it is read once, at start, and then known
// from the answers to its own writes.
type reportState struct {
	status report.Status
	// exists: the object is on the API (false: the next write creates it);
	// uid is its UID.
	exists bool
	uid    types.UID
	// statusWritten: status is the object's status (false: a new report,
	// created and not yet written).
	statusWritten bool
}

// loadReport takes the agent's report from the first list of its watch
// (none: the first write creates it). It waits for that list as long as ctx
// lasts: a report written over the one the API holds would lose its result.
func (a *agent) loadReport(ctx context.Context) {
	if r, ok := a.reports.first(ctx); ok && r != nil {
		a.rep = reportState{status: r.Status, exists: true, uid: r.UID, statusWritten: r.Status != (report.Status{})}
		a.resumePreflight(r.Status.Preflight)
		a.resumeStaging(r.Status.Staging)
		a.offer = r.Status.Offer
	}
}

// reportDeleted takes a deletion of the report the agent wrote: it is
// written again whole.
func (a *agent) reportDeleted(uid types.UID) {
	if uid == a.rep.uid {
		a.rep.exists = false
	}
}

// lastReport is the agent's apply result for the start node names: none
// when the operator has started the node since the result was written (a
// new revision, or a retry of the same one).
func (a *agent) lastReport(node *corev1.Node) decide.NodeReport {
	ap := a.rep.status.Apply
	if ap == nil {
		return decide.NodeReport{}
	}
	if s := a.askOf(node).startedAt; s != "" && s != ap.StartedAt {
		return decide.NodeReport{}
	}
	r := decide.NodeReport{AppliedRevision: ap.Revision, Status: ap.Status, Message: ap.Message, Heartbeat: ap.Heartbeat, ResultCode: ap.ResultCode,
		NoReboot: ap.NoReboot, HostBuild: ap.HostBuild}
	for _, u := range ap.Installed {
		r.Installed = append(r.Installed, host.InstalledUpdate{KB: u.KB, Title: u.Title, CveIDs: u.CveIDs})
	}
	return r
}

// The report CRD's bounds on apply.installed (src/api/report.rs): a write
// past them is refused whole, and the operator would never see the result.
const (
	maxInstalled = 64
	maxCVEs      = 256
	maxCVELength = 64
)

// installedRecord is what the servicing tasks installed as the report
// carries it, cut to the CRD's bounds.
func installedRecord(list []host.InstalledUpdate) []report.InstalledUpdate {
	var out []report.InstalledUpdate
	for _, u := range list {
		r := report.InstalledUpdate{KB: oneLine(u.KB), Title: oneLine(u.Title)}
		// The CRD requires a name; an update Windows Update gave neither a KB
		// nor a title is no record.
		if r.KB == "" || len(out) == maxInstalled {
			continue
		}
		for _, id := range u.CveIDs {
			if len(id) <= maxCVELength && len(r.CveIDs) < maxCVEs {
				r.CveIDs = append(r.CveIDs, id)
			}
		}
		out = append(out, r)
	}
	return out
}

// observed is the status with what the agent observes now. A value the
// agent could not read yet keeps what the report has.
func (a *agent) observed(spec report.Status) report.Status {
	spec.AgentVersion = a.o.Version
	if a.obsKnown {
		o := report.Observed{
			CNIMode:         a.obs.CNIMode,
			CSIProxyVersion: a.csiProxyVersion(),
			RuntimeService:  a.obs.RuntimeService.Describe(),
			CSIProxyHost:    a.csiProxyHost(),
		}
		spec.Observed = nil
		if o != (report.Observed{}) {
			spec.Observed = &o
		}
	}
	if p := a.preflightReport(); p != nil {
		spec.Preflight = p
	}
	if a.hnsRepair != nil {
		spec.HNSRepair = a.hnsRepair
	}
	if s := a.stagingReport(); s != nil {
		spec.Staging = s
	}
	spec.Offer = a.offer
	if a.hnsKnown {
		spec.HNS = &report.HNS{LoadBalancers: int64(a.hns.LoadBalancers), Endpoints: int64(a.hns.RemoteEndpoints), BootID: a.hnsBoot}
		if !a.hnsSince.IsZero() {
			spec.HNS.ObservedAt = &metav1.Time{Time: a.hnsSince}
		}
	}
	return spec
}

// report writes the agent's apply result, with the observations. It is the
// answer to attempt (the operator's start the decision saw): a decision made
// for a start the Node no longer names is not written (errStaleReport).
func (a *agent) report(ctx context.Context, attempt opStart, r decide.NodeReport) error {
	node := a.view.current()
	if node == nil {
		return errNodeGone
	}
	if startOf(a.askOf(node)) != attempt {
		return permanent(errStaleReport)
	}
	before := a.lastReport(node)
	want := a.observed(a.rep.status)
	want.Apply = &report.Apply{Revision: r.AppliedRevision, Status: r.Status, Message: oneLine(r.Message), StartedAt: attempt.startedAt,
		Heartbeat: r.Heartbeat, ResultCode: r.ResultCode, NoReboot: r.NoReboot, HostBuild: r.HostBuild, Installed: installedRecord(r.Installed)}
	if err := a.write(ctx, want); err != nil {
		return err
	}
	a.statusEvent(ctx, node, before, r)
	return nil
}

// syncObservations writes the observations when they changed.
func (a *agent) syncObservations(ctx context.Context) error {
	return a.write(ctx, a.observed(a.rep.status))
}

// write makes the report's status say want: nothing when it already does,
// else one request to the status subresource (the first report is created
// first, owned by the Node so it goes with it). It retries until the writes land, the Node
// is gone (errNodeGone) or ctx ends.
func (a *agent) write(ctx context.Context, want report.Status) error {
	if a.rep.exists && a.rep.statusWritten && sameStatus(a.rep.status, want) {
		return nil
	}
	return a.retry(ctx, "write report", func(ctx context.Context) error {
		node := a.view.current()
		if node == nil {
			return permanent(errNodeGone)
		}
		if !a.rep.exists {
			r, err := a.o.Reports.Create(ctx, a.newReport(node))
			switch {
			case apierrors.IsAlreadyExists(err):
				// Written meanwhile (a deletion seen late, or recreated by an
				// earlier write whose answer was lost): read and replaced,
				// keeping its apply result when this write carries none.
				got, gerr := a.o.Reports.Get(ctx, a.o.NodeName)
				if gerr != nil {
					return gerr
				}
				if want.Apply == nil {
					want.Apply = got.Status.Apply
				}
				a.rep.exists, a.rep.uid, a.rep.status = true, got.UID, got.Status
				a.rep.statusWritten = got.Status != (report.Status{})
				return err
			case err != nil:
				return err
			}
			a.rep.exists, a.rep.uid, a.rep.statusWritten = true, r.UID, false
		}
		if !a.rep.statusWritten || !sameStatus(a.rep.status, want) {
			r, err := a.o.Reports.ReplaceStatus(ctx, a.o.NodeName, want)
			switch {
			case apierrors.IsNotFound(err):
				// Deleted by someone: written whole again.
				a.rep.exists = false
				return err
			case err != nil:
				return err
			}
			a.rep.status, a.rep.uid, a.rep.statusWritten = r.Status, r.UID, true
		}
		return nil
	})
}

// confirmStart reads the node's operations before the host is worked on:
// the report that precedes the work may have landed after the operator moved
// on (failed the node at nodeTimeout and put it back into service, or started
// it again), which its watch may not have shown yet. A read, not a write.
// errStaleReport when the start is no longer the current one as it was.
func (a *agent) confirmStart(ctx context.Context, attempt opStart) error {
	node := a.view.current()
	if attempt.name == "" || node == nil {
		return nil // standalone: no operator to move on
	}
	return a.retry(ctx, "list operations", func(ctx context.Context) error {
		ops, err := a.o.Operations.List(ctx, a.o.NodeName)
		switch {
		case err != nil:
			return err
		case startOf(askOf(operation.Current(ops, node.Name, string(node.UID)))) != attempt:
			return permanent(errStaleReport)
		}
		return nil
	})
}

// newReport is the first report of this node: named after it and owned by
// it, so the garbage collector deletes it with the Node.
func (a *agent) newReport(node *corev1.Node) *report.Report {
	return &report.Report{
		ObjectMeta: metav1.ObjectMeta{
			Name:      node.Name,
			Namespace: a.o.Namespace,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}},
		},
	}
}

// sameStatus compares as the API stores them (times in whole seconds).
func sameStatus(x, y report.Status) bool {
	a, err1 := json.Marshal(x)
	b, err2 := json.Marshal(y)
	return err1 == nil && err2 == nil && string(a) == string(b)
}

// oneLine makes a message fit a column a person reads in kubectl.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// judgedSince is when a verdict was reached, as the report carries it.
func judgedSince(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	m := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &m
}
