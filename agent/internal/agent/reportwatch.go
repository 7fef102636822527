package agent

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"winpool.dev/agent/internal/report"
)

// reportWatcher follows the agent's own report. The agent is its only
// writer and knows its content from its writes; the watch serves the first
// read (its list) and tells of a deletion (`kubectl delete wnr`), after
// which the report is written again whole instead of waiting for the next
// change: without it winpool would take the node for one whose agent never
// reported.
type reportWatcher struct {
	store    cache.Store
	informer cache.Controller
	// deleted carries the UIDs of reports deleted; a deletion the agent
	// has not taken yet is never dropped for a later one.
	deleted chan types.UID
}

func newReportWatcher(reports report.Client, node string) *reportWatcher {
	w := &reportWatcher{deleted: make(chan types.UID, 16)}
	w.store, w.informer = cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: reports.ListWatch(node),
		ObjectType:    &unstructured.Unstructured{},
		Handler: cache.ResourceEventHandlerFuncs{
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				if u, ok := obj.(*unstructured.Unstructured); ok {
					select {
					case w.deleted <- u.GetUID():
					default:
					}
				}
			},
		},
	})
	return w
}

func (w *reportWatcher) run(ctx context.Context) { w.informer.RunWithContext(ctx) }

// first is the report the first list found (nil: none), once it arrived;
// ok false when ctx ended first.
func (w *reportWatcher) first(ctx context.Context) (r *report.Report, ok bool) {
	if !cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced) {
		return nil, false
	}
	for _, obj := range w.store.List() {
		if u, isU := obj.(*unstructured.Unstructured); isU {
			if r, err := report.FromUnstructured(u); err == nil {
				return r, true
			}
		}
	}
	return nil, true
}
