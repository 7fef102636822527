package agent

import (
	"context"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/names"
)

// Event reasons on the Node, one per status the agent moves it to.
const (
	ReasonApplyStarted   = "WinpoolApplyStarted"
	ReasonRebooting      = "WinpoolRebooting"
	ReasonApplyFailed    = "WinpoolApplyFailed"
	ReasonApplySucceeded = "WinpoolApplySucceeded"
)

// eventTimeout bounds an Event write: an Event is a courtesy to whoever runs
// `kubectl describe node`, never worth holding the agent's work up.
const eventTimeout = 5 * time.Second

// statusEvent records a core/v1 Event on the Node when the agent's report
// moves it into a new status (the report stays the source of truth; an
// Event that fails to be written is logged, not retried). Events go to the
// agent's own namespace, where its Role lets it create them; `kubectl
// describe node` shows them there with the kubelet's.
func (a *agent) statusEvent(ctx context.Context, node *corev1.Node, before, r decide.NodeReport) {
	if !a.o.Events || node == nil || before.AppliedRevision == r.AppliedRevision && before.Status == r.Status {
		return
	}
	typ, reason := corev1.EventTypeNormal, ""
	switch r.Status {
	case names.StatusApplying:
		reason = ReasonApplyStarted
	case names.StatusRebooting:
		reason = ReasonRebooting
	case names.StatusFailed:
		typ, reason = corev1.EventTypeWarning, ReasonApplyFailed
	case names.StatusSucceeded:
		reason = ReasonApplySucceeded
	default:
		return
	}
	a.nodeEvent(ctx, node, typ, reason, "revision "+r.AppliedRevision+": "+oneLine(r.Message))
}

// nodeEvent records one Event on the Node, once: a failure is logged.
func (a *agent) nodeEvent(ctx context.Context, node *corev1.Node, typ, reason, message string) {
	if !a.o.Events {
		return
	}
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		// A Node's Events live in "default", where the kubelet's are: the API
		// server refuses an Event about a cluster-scoped object in any other
		// namespace. The chart's policy holds the agent to its own Node's.
		ObjectMeta: metav1.ObjectMeta{GenerateName: node.Name + ".winpool-", Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
		},
		Reason:              reason,
		Message:             eventNote(message),
		Type:                typ,
		Source:              corev1.EventSource{Component: "winpool-agent", Host: node.Name},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "winpool.dev/agent",
		ReportingInstance:   "winpool-agent-" + node.Name,
	}
	ctx, cancel := context.WithTimeout(ctx, eventTimeout)
	defer cancel()
	if _, err := a.o.Client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{FieldManager: names.FieldManager}); err != nil && ctx.Err() == nil {
		a.log.Warn("cannot record an Event on the Node", "reason", reason, "err", err)
	}
}

// eventNoteLimit is the most an Event's message may hold: the API server
// refuses a longer one ("can have at most 1024 characters", in bytes) and
// the Event is lost, while a report's message may hold 2048.
const eventNoteLimit = 1024

// eventNote cuts msg to eventNoteLimit bytes at a character boundary,
// saying it was cut.
func eventNote(msg string) string {
	if len(msg) <= eventNoteLimit {
		return msg
	}
	const more = " …"
	end := eventNoteLimit - len(more)
	for end > 0 && !utf8.RuneStart(msg[end]) {
		end--
	}
	return msg[:end] + more
}
