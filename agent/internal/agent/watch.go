package agent

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// nodeWatcher follows one Node: list and watch with a metadata.name field
// selector, re-watching from the last resource version when a watch ends and
// re-listing when that version has expired. It is one goroutine and one
// Node, because the simulated fleet runs thousands of agents in a process.
type nodeWatcher struct {
	client  kubernetes.Interface
	name    string
	log     *slog.Logger
	backoff func() *wait.Backoff

	mu   sync.Mutex
	node *corev1.Node
	// changed holds at most one pending signal: the reader always takes the
	// latest Node, so coalescing signals loses nothing.
	changed chan struct{}
}

func newNodeWatcher(client kubernetes.Interface, name string, log *slog.Logger, b func() *wait.Backoff) *nodeWatcher {
	return &nodeWatcher{client: client, name: name, log: log, backoff: b, changed: make(chan struct{}, 1)}
}

// latest is the Node as last listed or watched; nil before the first list
// and while the Node does not exist.
func (w *nodeWatcher) latest() *corev1.Node {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.node
}

func (w *nodeWatcher) publish(n *corev1.Node) {
	if n != nil && n.ManagedFields != nil {
		// managedFields are most of a Node's size and the agent never reads
		// them. Dropped from a shallow copy: the event's object may be shared
		// with whoever delivered it (client-go's fake tracker stores it).
		c := *n
		c.ManagedFields = nil
		n = &c
	}
	w.mu.Lock()
	w.node = n
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *nodeWatcher) run(ctx context.Context) {
	selector := fields.OneTermEqualSelector("metadata.name", w.name).String()
	b := w.backoff()
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			list, err := w.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: selector})
			if err != nil {
				w.wait(ctx, b, "list", err)
				continue
			}
			w.publish(w.own(list.Items))
			rv = list.ResourceVersion
		}
		// Servers end watches after a while; a random timeout spreads the
		// re-watches of many agents, as client-go's reflector does.
		timeout := int64(300 + rand.IntN(300))
		wi, err := w.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
			FieldSelector:       selector,
			ResourceVersion:     rv,
			AllowWatchBookmarks: true,
			TimeoutSeconds:      &timeout,
		})
		if err != nil {
			if expired(err) {
				rv = ""
			}
			w.wait(ctx, b, "watch", err)
			continue
		}
		next, events, err := w.consume(ctx, wi, rv)
		wi.Stop()
		rv = next
		switch {
		case err != nil:
			w.wait(ctx, b, "watch", err)
		case events == 0:
			// A watch that ends at once, again and again, must not spin.
			w.wait(ctx, b, "watch", nil)
		default:
			b = w.backoff()
		}
	}
}

// consume reads one watch until it ends. It returns the resource version to
// watch from next ("" to re-list), how many events it saw, and the error that
// ended it, if one did.
func (w *nodeWatcher) consume(ctx context.Context, wi watch.Interface, rv string) (string, int, error) {
	events := 0
	for {
		select {
		case <-ctx.Done():
			return rv, events, nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return rv, events, nil
			}
			events++
			switch ev.Type {
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if expired(err) {
					return "", events, err
				}
				return rv, events, err
			case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
				n, ok := ev.Object.(*corev1.Node)
				if !ok {
					continue
				}
				if n.ResourceVersion != "" {
					rv = n.ResourceVersion
				}
				if ev.Type == watch.Bookmark || n.Name != w.name {
					// A server (or a test fake) that ignores the field
					// selector must not make the agent act on another node.
					continue
				}
				if ev.Type == watch.Deleted {
					w.publish(nil)
				} else {
					w.publish(n)
				}
			}
		}
	}
}

func (w *nodeWatcher) own(items []corev1.Node) *corev1.Node {
	for i := range items {
		if items[i].Name == w.name {
			// A copy, so the rest of the list (if a server ignored the
			// selector) is not kept alive behind it.
			n := items[i]
			return &n
		}
	}
	return nil
}

func (w *nodeWatcher) wait(ctx context.Context, b *wait.Backoff, call string, err error) {
	d := b.Step()
	if err != nil {
		w.log.Warn("watching the Node failed; retrying", "call", call, "in", d.Round(time.Millisecond).String(), "err", err)
	}
	sleep(ctx, d)
}

func expired(err error) bool { return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) }
