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
	// changed: see signallingInformer.
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
	w.store, w.informer = signallingInformer(lw, &corev1.Node{}, w.changed)
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
