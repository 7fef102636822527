package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	names.AnnAppliedRevision: true,
	names.AnnApplyStatus:     true,
	names.AnnApplyMessage:    true,
	names.AnnAgentVersion:    true,
	names.AnnCSIProxyVersion: true,
	names.AnnCNIMode:         true,
	names.AnnHNSLoadBalancer: true,
	names.AnnHNSEndpoints:    true,
}

var errNodeGone = errors.New("the Node does not exist")

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
	}
	if a.hnsKnown {
		want[names.AnnHNSLoadBalancer] = ptr(strconv.Itoa(a.hns.LoadBalancers))
		want[names.AnnHNSEndpoints] = ptr(strconv.Itoa(a.hns.RemoteEndpoints))
	}
	return want
}

// report writes the agent's report, with the observations, on the Node.
func (a *agent) report(ctx context.Context, r decide.NodeReport) error {
	want := a.observations()
	want[names.AnnAppliedRevision] = ptr(r.AppliedRevision)
	want[names.AnnApplyStatus] = ptr(string(r.Status))
	want[names.AnnApplyMessage] = ptr(oneLine(r.Message))
	before := a.view.current()
	if err := a.write(ctx, want); err != nil {
		return err
	}
	a.statusEvent(ctx, before, r)
	return nil
}

// syncObservations writes the observations that differ from the Node's.
func (a *agent) syncObservations(ctx context.Context) error {
	return a.write(ctx, a.observations())
}

// write makes the Node's annotations say want, writing only the keys whose
// value on the Node (as the agent sees it now, so keys someone deleted are
// written again) differs. It retries until the write lands, the Node is gone
// (errNodeGone) or ctx ends.
func (a *agent) write(ctx context.Context, want map[string]*string) error {
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
	// A JSON merge patch of metadata.annotations alone: null deletes a key,
	// and nothing else of the Node is in the request.
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": changes}})
	if err != nil {
		return err
	}
	return a.retry(ctx, "patch node", func(ctx context.Context) error {
		n, err := a.o.Client.CoreV1().Nodes().Patch(ctx, a.o.NodeName, types.MergePatchType, body,
			metav1.PatchOptions{FieldManager: names.FieldManager})
		if apierrors.IsNotFound(err) {
			return permanent(errNodeGone)
		}
		if err != nil {
			return err
		}
		a.view.setWritten(n, changes)
		return nil
	})
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
