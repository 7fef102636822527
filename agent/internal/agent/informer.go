package agent

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// signallingInformer keeps what lw lists and watches, without managedFields
// (most of an object's size; the agent never reads them), and leaves one
// pending signal on changed after any event: the reader always takes the
// latest objects from the store, so coalescing signals loses nothing.
func signallingInformer(lw cache.ListerWatcher, obj runtime.Object, changed chan struct{}) (cache.Store, cache.Controller) {
	signal := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	return cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    obj,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { signal() },
			UpdateFunc: func(any, any) { signal() },
			DeleteFunc: func(any) { signal() },
		},
		Transform: func(o any) (any, error) {
			if m, err := meta.Accessor(o); err == nil {
				m.SetManagedFields(nil)
			}
			return o, nil
		},
	})
}
