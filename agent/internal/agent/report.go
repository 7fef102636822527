package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/names"
)

// agentAnnotations are the only keys the agent writes; the chart's admission
// policy refuses any other change an agent makes to its Node.
var agentAnnotations = map[string]bool{
	names.AnnAppliedRevision:   true,
	names.AnnApplyStatus:       true,
	names.AnnApplyMessage:      true,
	names.AnnAgentVersion:      true,
	names.AnnCSIProxyVersion:   true,
	names.AnnCNIMode:           true,
	names.AnnRuntimeService:    true,
	names.AnnCSIProxyHost:      true,
	names.AnnHNSLoadBalancer:   true,
	names.AnnHNSEndpoints:      true,
	names.AnnPreflight:         true,
	names.AnnPreflightRevision: true,
}

var errNodeGone = errors.New("the Node does not exist")

// errStaleReport: the report answered an attempt the Node no longer names
// (the operator started the node again, e.g. a retry of a failure, while the
// agent decided or worked); it was not written.
var errStaleReport = errors.New("the report is for an earlier attempt")

// maxMessage bounds apply-message: a servicing error can carry a whole log.
const maxMessage = 1024

// observations are the annotations that say what the agent sees on the host
// (nil: the key must be absent). A value the agent could not read yet is
// left out, so the Node keeps what it has.
func (a *agent) observations() map[string]*string {
	want := map[string]*string{names.AnnAgentVersion: ptr(a.o.Version)}
	if a.obsKnown {
		want[names.AnnCNIMode] = nonEmpty(a.obs.CNIMode)
		want[names.AnnCSIProxyVersion] = nonEmpty(a.csiProxyVersion())
		want[names.AnnRuntimeService] = nonEmpty(a.obs.RuntimeService.Describe())
		want[names.AnnCSIProxyHost] = nonEmpty(a.csiProxyHost())
	}
	a.preflightObservations(want)
	if a.hnsKnown {
		want[names.AnnHNSLoadBalancer] = ptr(strconv.Itoa(a.hns.LoadBalancers))
		want[names.AnnHNSEndpoints] = ptr(strconv.Itoa(a.hns.RemoteEndpoints))
	}
	return want
}

// report writes the agent's report, with the observations, on the Node. It
// is the answer to attempt (the operator's started-at the decision saw): when
// there is one, the write carries it as a precondition, so a report that took
// longer than a retry (an install that outlived nodeTimeout, then a retry)
// cannot land on the retried node and fail it again; errStaleReport then.
func (a *agent) report(ctx context.Context, attempt opStart, r decide.NodeReport) error {
	want := a.observations()
	want[names.AnnAppliedRevision] = ptr(r.AppliedRevision)
	want[names.AnnApplyStatus] = ptr(string(r.Status))
	want[names.AnnApplyMessage] = ptr(oneLine(r.Message))
	before := a.view.current()
	if err := a.write(ctx, want, attempt); err != nil {
		return err
	}
	a.statusEvent(ctx, before, r)
	return nil
}

// syncObservations writes the observations that differ from the Node's.
// Observations answer no attempt: they are never a precondition's concern.
func (a *agent) syncObservations(ctx context.Context) error {
	return a.write(ctx, a.observations(), opStart{})
}

// write makes the Node's annotations say want, writing only the keys whose
// value on the Node (as the agent sees it now, so keys someone deleted are
// written again) differs. With an attempt, the write applies only while the
// Node's started-at is still that attempt (errStaleReport otherwise). It
// retries until the write lands, the Node is gone (errNodeGone) or ctx ends.
func (a *agent) write(ctx context.Context, want map[string]*string, attempt opStart) error {
	node := a.view.current()
	if node == nil {
		return errNodeGone
	}
	changes := map[string]*string{}
	for k, v := range want {
		if !agentAnnotations[k] {
			return fmt.Errorf("the agent may not write annotation %q", k)
		}
		have, ok := node.Annotations[k]
		if v == nil && ok || v != nil && (!ok || have != *v) {
			changes[k] = v
		}
	}
	if len(changes) == 0 {
		return nil
	}
	patchType, body, err := annotationPatch(changes, attempt)
	if err != nil {
		return err
	}
	return a.retry(ctx, "patch node", func(ctx context.Context) error {
		n, err := a.o.Client.CoreV1().Nodes().Patch(ctx, a.o.NodeName, patchType, body,
			metav1.PatchOptions{FieldManager: names.FieldManager})
		switch {
		case apierrors.IsNotFound(err):
			return permanent(errNodeGone)
		case attempt.startedAt != "" && apierrors.IsInvalid(err):
			// The test failed, or admission refused the write (also 422).
			return a.reread(ctx, attempt, err)
		case err != nil:
			return err
		}
		a.view.setWritten(n, changes)
		return nil
	})
}

// annotationPatch is the request that makes changes. Without an operator
// start, a JSON merge patch of metadata.annotations alone (null deletes a
// key). With one, a JSON patch that first tests the Node's started-at is that
// start and its state the one the decision saw (a nodeTimeout that failed
// the node meanwhile refuses the report too): the API server applies it
// atomically or answers 422. Both hold nothing else of the Node.
func annotationPatch(changes map[string]*string, attempt opStart) (types.PatchType, []byte, error) {
	if attempt.startedAt == "" {
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": changes}})
		return types.MergePatchType, body, err
	}
	ops := []map[string]any{{"op": "test", "path": annotationPointer(names.AnnStartedAt), "value": attempt.startedAt}}
	if attempt.state != "" {
		ops = append(ops, map[string]any{"op": "test", "path": annotationPointer(names.AnnState), "value": attempt.state})
	}
	keys := make([]string, 0, len(changes))
	for k := range changes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if v := changes[k]; v == nil {
			// remove alone fails on a key someone deleted meanwhile; after an
			// add it cannot.
			ops = append(ops, map[string]any{"op": "add", "path": annotationPointer(k), "value": ""},
				map[string]any{"op": "remove", "path": annotationPointer(k)})
		} else {
			// add replaces a member that exists (RFC 6902 4.1).
			ops = append(ops, map[string]any{"op": "add", "path": annotationPointer(k), "value": *v})
		}
	}
	body, err := json.Marshal(ops)
	return types.JSONPatchType, body, err
}

// annotationPointer is the JSON pointer (RFC 6901) of an annotation.
func annotationPointer(key string) string {
	return "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// reread tells why a report for attempt was refused (refused: the API's
// answer). It reads the Node: when it names another start, or the same start
// in another state, the report is stale (permanent errStaleReport, and the agent's picture of its Node is
// the one read); otherwise the refusal is the answer, retried like any other
// failed write.
func (a *agent) reread(ctx context.Context, attempt opStart, refused error) error {
	n, err := a.o.Client.CoreV1().Nodes().Get(ctx, a.o.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return permanent(errNodeGone)
	case err != nil:
		return refused
	case startOf(n) == attempt:
		return refused
	}
	a.view.setWritten(n, nil)
	return permanent(errStaleReport)
}

func ptr(s string) *string { return &s }

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// oneLine makes a message fit an annotation a person reads in kubectl.
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
