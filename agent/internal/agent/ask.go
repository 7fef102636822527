package agent

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	corev1 "k8s.io/api/core/v1"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/names"
	"winpool.dev/agent/internal/operation"
)

// ask is what winpool asks of this node now: its current
// WindowsNodeOperation, the only authority the agent acts on. A Node's
// labels, annotations and cordon start nothing: anyone who may patch Nodes
// can write them. Zero: nothing asked.
type ask struct {
	// name is the operation's; "" when none.
	name      string
	pool      string
	revision  string
	startedAt string
	// state is the operation's phase (names.State*).
	state         string
	installBudget string
	undo          string
	// drained: winpool took the node out of service for this start.
	drained bool
}

// opWatcher follows the operations of the agent's node (a field selector on
// spec.nodeName), as nodeWatcher follows the Node.
type opWatcher struct {
	store    cache.Store
	informer cache.Controller
	// changed: see signallingInformer.
	changed chan struct{}
}

func newOpWatcher(ops operation.Client, node string) *opWatcher {
	w := &opWatcher{changed: make(chan struct{}, 1)}
	w.store, w.informer = signallingInformer(ops.ListWatch(node), &unstructured.Unstructured{}, w.changed)
	return w
}

func (w *opWatcher) run(ctx context.Context) { w.informer.RunWithContext(ctx) }

// current is the node's current operation (nil: none), by the node's name
// and UID: a server (or a test fake) that ignores the field selector cannot
// make the agent act on another node's.
func (w *opWatcher) current(node *corev1.Node) *operation.Operation {
	var ops []*operation.Operation
	for _, obj := range w.store.List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			if o, err := operation.FromUnstructured(u); err == nil {
				ops = append(ops, o)
			}
		}
	}
	return operation.Current(ops, node.Name, string(node.UID))
}

func askOf(o *operation.Operation) ask {
	if o == nil {
		return ask{}
	}
	return ask{name: o.Name, pool: o.Spec.Pool, revision: o.Spec.Revision, startedAt: o.Spec.StartedAt, state: o.Status.Phase,
		installBudget: o.Spec.InstallBudget, undo: o.Spec.UndoGate, drained: o.Status.DrainedAt != ""}
}

// askOf is what winpool asks of node. An agent run without the operator
// (Standalone) takes its Node's pool and revision labels instead: whoever
// sets them has taken the drain on themselves.
func (a *agent) askOf(node *corev1.Node) ask {
	if a.o.Standalone {
		return ask{pool: node.Labels[names.LabelPool], revision: node.Labels[names.LabelRevision]}
	}
	return askOf(a.ops.current(node))
}

// working: winpool lets the agent work on the host now (decide.MayTouch).
func (a *agent) working(node *corev1.Node) bool {
	q := a.askOf(node)
	return decide.MayTouch(q.state, q.startedAt, a.o.Standalone)
}
