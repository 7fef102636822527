package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"winpool.dev/agent/internal/names"
)

// target is a pool's target revision as its marked ConfigMap says.
type target struct {
	revision string
	data     map[string]string
}

// targetWatcher follows the revision ConfigMaps the operator marks as their
// pools' targets (names.LabelTarget): a handful of objects that change when
// a pool's spec does, so the agent learns a pending revision before the
// operator starts its node, and can preflight it, without anyone writing the
// Node.
type targetWatcher struct {
	store    cache.Store
	informer cache.Controller
	// changed: see signallingInformer.
	changed chan struct{}
}

func newTargetWatcher(client kubernetes.Interface, namespace string) *targetWatcher {
	selector := names.LabelTarget + "=true"
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return client.CoreV1().ConfigMaps(namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return client.CoreV1().ConfigMaps(namespace).Watch(ctx, o)
		},
	}, client) // a fake clientset cannot stream a list
	w := &targetWatcher{changed: make(chan struct{}, 1)}
	w.store, w.informer = signallingInformer(lw, &corev1.ConfigMap{}, w.changed)
	return w
}

func (w *targetWatcher) run(ctx context.Context) { w.informer.RunWithContext(ctx) }

// synced: the first list has arrived.
func (w *targetWatcher) synced() bool { return w.informer.HasSynced() }

// of is pool's target; ok false when the operator marks none (or two: a
// moment of a move the agent waits out).
func (w *targetWatcher) of(pool string) (target, bool) {
	if pool == "" {
		return target{}, false
	}
	var found []target
	for _, obj := range w.store.List() {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Labels[names.LabelPool] != pool || cm.Labels[names.LabelTarget] != "true" {
			continue
		}
		found = append(found, target{revision: cm.Labels[names.LabelRevision], data: cm.Data})
	}
	if len(found) != 1 || found[0].revision == "" {
		return target{}, false
	}
	return found[0], true
}

// configMap is the data of a marked ConfigMap by name, if the agent has it.
// A revision ConfigMap never changes once written, so the watched copy is as
// good as a GET.
func (w *targetWatcher) configMap(namespace, name string) (map[string]string, bool) {
	obj, ok, err := w.store.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, false
	}
	return cm.Data, true
}
