package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// nodeWatcher follows the agent's own Node with client-go's informer on a
// metadata.name field selector, as the kubelet follows its Node: re-watched
// from the last resource version when a watch ends, re-listed when that
// version has expired, retried with jittered backoff when the API fails, so
// thousands of agents that lost the API together do not come back in step.
type nodeWatcher struct {
	name     string
	store    cache.Store
	informer cache.Controller
	// changed holds at most one pending signal: the reader always takes the
	// latest Node, so coalescing signals loses nothing.
	changed chan struct{}
}

func newNodeWatcher(client kubernetes.Interface, name string) *nodeWatcher {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return client.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return client.CoreV1().Nodes().Watch(ctx, o)
		},
	}, client) // a fake clientset cannot stream a list
	w := &nodeWatcher{name: name, changed: make(chan struct{}, 1)}
	signal := func() {
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	w.store, w.informer = cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Node{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { signal() },
			UpdateFunc: func(any, any) { signal() },
			DeleteFunc: func(any) { signal() },
		},
		// managedFields are most of a Node's size and the agent never reads them.
		Transform: func(obj any) (any, error) {
			if n, ok := obj.(*corev1.Node); ok {
				n.ManagedFields = nil
			}
			return obj, nil
		},
	})
	return w
}

func (w *nodeWatcher) run(ctx context.Context) { w.informer.RunWithContext(ctx) }

// latest is the Node as last listed or watched; nil before the first list
// and while the Node does not exist. A server (or a test fake) that ignores
// the field selector cannot make the agent act on another node: the Node is
// looked up by its name. The agent only reads it.
func (w *nodeWatcher) latest() *corev1.Node {
	obj, ok, err := w.store.GetByKey(w.name)
	if err != nil || !ok {
		return nil
	}
	n, _ := obj.(*corev1.Node)
	return n
}
