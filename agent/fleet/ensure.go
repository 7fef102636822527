package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ensureNodes creates the fleet's nodes, or adopts those that exist (a
// restarted fleet, --no-create), createWorkers at a time. It returns the
// machine behind each node it will play.
func (f *Fleet) ensureNodes(ctx context.Context) (map[string]machine, error) {
	var (
		mu                        sync.Mutex
		machines                  = make(map[string]machine, f.s.Nodes)
		created, adopted, missing int
		firstErr                  error
		wg                        sync.WaitGroup
	)
	cnis := f.reportedCNIs(ctx)
	next := make(chan int)
	for range min(createWorkers, f.s.Nodes) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				node, isNew, err := f.ensureNode(ctx, i)
				mu.Lock()
				switch {
				case err != nil:
					if firstErr == nil {
						firstErr = err
					}
				case node == nil:
					missing++
				default:
					m, notes := machineOf(node, f.s, cnis[node.Name])
					for _, note := range notes {
						f.log.Warn("adopting an existing node: "+note, "node", node.Name)
					}
					if isNew {
						m.booted = time.Now()
						created++
					} else {
						adopted++
					}
					machines[node.Name] = m
				}
				mu.Unlock()
			}
		}()
	}
	for i := range f.s.Nodes {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	f.log.Info("simulated Windows nodes ready", "created", created, "adopted", adopted, "missing", missing,
		"prefix", f.s.NamePrefix, "os", f.s.OS, "build", f.s.Build.String())
	return machines, nil
}

// ensureNode returns the fleet's i-th node and whether this call created it;
// nil when it does not exist and --no-create forbids creating it.
func (f *Fleet) ensureNode(ctx context.Context, i int) (*corev1.Node, bool, error) {
	nodes := f.admin.CoreV1().Nodes()
	name := f.s.NodeName(i)
	if f.s.Create {
		var node *corev1.Node
		err := retry(ctx, func(ctx context.Context) error {
			var err error
			node, err = nodes.Create(ctx, newNode(f.s, i), metav1.CreateOptions{FieldManager: fieldManager})
			return err
		})
		if err == nil {
			return node, true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, false, fmt.Errorf("creating node %s: %w", name, err)
		}
	}
	var node *corev1.Node
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		node, err = nodes.Get(ctx, name, metav1.GetOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("reading node %s: %w", name, err)
	}
	return node, false, nil
}
