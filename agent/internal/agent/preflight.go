package agent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
	"winpool.dev/agent/internal/report"
)

// preflightEvery is how often a pending revision's preflight is run again
// while the node waits for its turn (a window, a health gate, other nodes
// first): a source that went away since is seen before the cordon. Written
// only when the verdict changes.
const preflightEvery = 10 * time.Minute

// preflightSpread spreads the agents' first judgement of a new target: every
// agent of a pool sees the operator move the mark at the same moment, and all
// of them write as one ServiceAccount, which API Priority and Fairness queues
// as one flow (at 1,000 nodes a third of the writes of that moment were
// refused with 429 and retried). The operator starts a node as soon as its
// own verdict is in, so a pool's first starts wait a fraction of this.
const preflightSpread = 3 * time.Second

// preflightHold is a new target whose judgement waits until a moment of its
// own (preflightSpread).
type preflightHold struct {
	revision string
	until    time.Time
}

// preflightVerdict is the last preflight: for which revision, its result,
// when it ran, and since when it has said the same.
type preflightVerdict struct {
	revision string
	result   decide.PreflightResult
	value    string
	at       time.Time
	since    time.Time
	// update is what the install will take (nil: no OS update is needed,
	// or the verdict was read back from a report); staging downloads it.
	update *host.UpdateRequest
}

// preflight judges the pool's target revision on this host unless the agent
// is applying it: read-only checks, whose verdict goes into the report
// (written only when it changes). A node the operator failed is judged again
// at once, so a retry is started on a verdict reached after the failure. A
// host that cannot be read now is judged later.
func (a *agent) preflight(ctx context.Context, node *corev1.Node) {
	pool := node.Labels[names.LabelPool]
	t, ok := a.targets.of(pool)
	working := a.working(node)
	if r := a.lastReport(node); !ok || node.Labels[names.LabelRevision] == t.revision && (working || r.AppliedRevision == t.revision && r.Status == names.StatusSucceeded) {
		// Nothing pending, the agent is applying it, or the host runs it
		// (the operator needs no preflight of a node already at its target).
		return
	}
	if a.pre.revision == t.revision && !failedSince(node, a.pre.at) && time.Since(a.pre.at) < preflightEvery {
		return
	}
	if a.heldBack(t.revision) {
		return
	}
	if !a.obsKnown || a.obsErr != "" {
		return
	}
	if a.searching == t.revision && time.Now().Before(a.searchNext) {
		return
	}
	cfg := readRevisionConfig(t.data, pool, t.revision)
	var result decide.PreflightResult
	var update *host.UpdateRequest
	switch cfg.Status {
	case decide.ConfigFound:
		result, update = a.judge(ctx, t.revision, cfg)
	default:
		result.Blocked = []string{"revision ConfigMap " + names.ConfigMapName(pool, t.revision) + " is unreadable: " + cfg.Problem}
	}
	now := time.Now()
	if result.Pending {
		// No verdict until the search answers: the operator holds the node
		// (awaited), and the host is asked again at the next recheck.
		a.searching, a.searchNext = t.revision, now.Add(a.t.recheck)
		a.preflightDue = time.After(a.t.recheck)
		return
	}
	a.searching = ""
	v := result.String()
	if v != a.pre.value || t.revision != a.pre.revision {
		a.log.Info("preflight", "revision", t.revision, "result", v)
		a.pre.since = now
	}
	a.pre = preflightVerdict{revision: t.revision, result: result, value: v, at: now, since: a.pre.since, update: update}
}

// heldBack: the judgement of rev waits for its moment. Only a target that
// replaced one already judged waits: an agent's first verdict rides its first
// report, and agents start at moments of their own.
func (a *agent) heldBack(rev string) bool {
	if a.pre.revision == "" || a.pre.revision == rev || a.t.preflightDelay == nil {
		return false
	}
	if a.preHold.revision != rev {
		d := a.t.preflightDelay()
		a.preHold = preflightHold{revision: rev, until: time.Now().Add(d)}
		a.preflightDue = time.After(d)
		return true
	}
	return time.Now().Before(a.preHold.until)
}

// failedSince: the operator failed the node after t.
func failedSince(node *corev1.Node, t time.Time) bool {
	if node.Annotations[names.AnnState] != names.StateFailed {
		return false
	}
	since, err := time.Parse(time.RFC3339, node.Annotations[names.AnnStateSince])
	return err == nil && since.After(t)
}

// judge is the verdict on revision, and the OS update it needs (nil: none).
func (a *agent) judge(ctx context.Context, revision string, cfg decide.RevisionConfig) (decide.PreflightResult, *host.UpdateRequest) {
	in := decide.PreflightInput{Config: cfg.Config, Observed: a.obs, HNS: a.hnsNow()}
	var update *host.UpdateRequest
	if req, needed, err := decide.PreflightUpdate(revision, cfg.Config, a.obs); err == nil && needed {
		f := a.o.Host.Preflight(ctx, req)
		in.Findings = &f
		update = &req
	}
	return decide.Preflight(in), update
}

// resumePreflight takes the verdict of the report a run of the agent before
// this one wrote (it restarted, e.g. after a reboot): an unchanged verdict
// then costs no write.
func (a *agent) resumePreflight(p *report.Preflight) {
	if p == nil || p.Revision == "" {
		return
	}
	result := decide.PreflightResult{Notes: p.Notes}
	if p.Verdict != report.VerdictReady {
		result.Blocked = p.Reasons
	}
	since := time.Now()
	if p.Since != nil {
		since = p.Since.Time
	}
	// Judged again at once: the host may have changed while the agent was down.
	a.pre = preflightVerdict{revision: p.Revision, result: result, value: result.String(), since: since}
}

// preflightReport is the report's preflight (nil before the first).
func (a *agent) preflightReport() *report.Preflight {
	if a.pre.revision == "" {
		return nil
	}
	p := &report.Preflight{Revision: a.pre.revision, Verdict: report.VerdictReady, Notes: bounded(a.pre.result.Notes), Since: judgedSince(a.pre.since)}
	if !a.pre.result.Ready() {
		p.Verdict, p.Reasons = report.VerdictBlocked, bounded(a.pre.result.Blocked)
	}
	return p
}

// maxListed bounds the preflight's reasons and notes, as the report CRD
// does (maxItems): a write past the bound is refused whole.
const maxListed = 32

// bounded is what fits the report: each line made one line of at most
// maxMessage bytes, at most maxListed of them, the last saying how many more.
func bounded(lines []string) []string {
	if len(lines) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(lines), maxListed))
	for i, l := range lines {
		if i == maxListed-1 && len(lines) > maxListed {
			out = append(out, fmt.Sprintf("and %d more", len(lines)-i))
			break
		}
		out = append(out, oneLine(l))
	}
	return out
}
