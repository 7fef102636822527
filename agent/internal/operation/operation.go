// Package operation reads the WindowsNodeOperations (winpool.dev/v1alpha1)
// winpool writes: one per start of one node, in the agents' namespace, the
// only authority the agent acts on. Anyone who may patch Nodes (a label
// syncer, a node template, the node's own kubelet credential) can write a
// Node's labels and annotations; only the operator's ServiceAccount may write
// an operation (the chart's RBAC and its ValidatingAdmissionPolicy). The
// shape is defined by the Rust types (src/api/operation.rs).
package operation

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// Resource names the operations' API.
var Resource = schema.GroupVersionResource{Group: "winpool.dev", Version: "v1alpha1", Resource: "windowsnodeoperations"}

// Operation is one start of one node.
type Operation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec   `json:"spec"`
	Status            Status `json:"status,omitempty"`
}

// Spec is what winpool asks; it never changes once written.
type Spec struct {
	NodeName       string `json:"nodeName"`
	NodeUID        string `json:"nodeUid"`
	Pool           string `json:"pool"`
	PoolGeneration int64  `json:"poolGeneration"`
	Revision       string `json:"revision"`
	// Action is Update or Undo.
	Action        string `json:"action"`
	StartedAt     string `json:"startedAt"`
	InstallBudget string `json:"installBudget,omitempty"`
	UndoGate      string `json:"undoGate,omitempty"`
}

// Status is how far winpool says the start got.
type Status struct {
	// Phase is the node's state in this start (names.State*).
	Phase      string `json:"phase,omitempty"`
	PhaseSince string `json:"phaseSince,omitempty"`
	// DrainedAt: winpool took the node out of service for this start; the
	// agent never reboots a node without it.
	DrainedAt string `json:"drainedAt,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
}

// Client reads the operations of one node.
type Client interface {
	// ListWatch lists and watches the operations of node.
	ListWatch(node string) cache.ListerWatcher
	// List reads the operations of node afresh.
	List(ctx context.Context, node string) ([]*Operation, error)
}

// NewClient is a Client over the dynamic client, in the agents' namespace.
func NewClient(dyn dynamic.Interface, namespace string) Client {
	return &client{dyn: dyn, api: dyn.Resource(Resource).Namespace(namespace)}
}

type client struct {
	dyn dynamic.Interface
	api dynamic.ResourceInterface
}

func (c *client) ListWatch(node string) cache.ListerWatcher {
	// spec.nodeName is a selectable field of the CRD: the API server sends
	// this agent its own node's operations and no other.
	only := fields.OneTermEqualSelector("spec.nodeName", node).String()
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = only
			return c.api.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = only
			return c.api.Watch(ctx, o)
		},
	}, c.dyn) // a fake dynamic client cannot stream a list
}

func (c *client) List(ctx context.Context, node string) ([]*Operation, error) {
	l, err := c.api.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, err
	}
	out := make([]*Operation, 0, len(l.Items))
	for i := range l.Items {
		o, err := FromUnstructured(&l.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// FromUnstructured reads an operation the dynamic client returned.
func FromUnstructured(u *unstructured.Unstructured) (*Operation, error) {
	var o Operation
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o); err != nil {
		return nil, fmt.Errorf("operation %s: %w", u.GetName(), err)
	}
	return &o, nil
}

// Current is the operation winpool's latest start of this node asks for:
// of those naming the node and its UID (a node re-created under the same
// name is another host), the one started last; of a start retargeted to
// another revision (one operation per revision), the one winpool wrote last
// (its phase's time). nil: none.
func Current(ops []*Operation, node, uid string) *Operation {
	var cur *Operation
	var curAt, curSince time.Time
	for _, o := range ops {
		if o.Spec.NodeName != node || o.Spec.NodeUID != uid {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, o.Spec.StartedAt)
		if err != nil {
			continue
		}
		since, _ := time.Parse(time.RFC3339Nano, o.Status.PhaseSince)
		if cur == nil || at.After(curAt) || at.Equal(curAt) && since.After(curSince) {
			cur, curAt, curSince = o, at, since
		}
	}
	return cur
}
