package fleet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// LabelAgentApp selects winpool's agent pods (app.kubernetes.io/name).
const LabelAgentApp = "app.kubernetes.io/name=winpool-agent"

// watchCluster feeds the HNS model from Services and EndpointSlices (what
// kube-proxy watches) and the failure injection from node labels, and
// returns once both are synced: an agent reading HNS before that would see a
// cluster without Services.
func (f *Fleet) watchCluster(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(f.admin, 0,
		informers.WithTransform(cache.TransformFunc(dropManagedFields)))
	var synced []cache.InformerSynced
	if f.s.HNS == HNSAuto {
		svc := factory.Core().V1().Services().Informer()
		if _, err := svc.AddEventHandler(handler(
			func(s *corev1.Service) { f.model.SetService(s) },
			func(s *corev1.Service) { f.model.DeleteService(s.Namespace, s.Name) },
		)); err != nil {
			return err
		}
		slices := factory.Discovery().V1().EndpointSlices().Informer()
		if _, err := slices.AddEventHandler(handler(
			func(s *discovery.EndpointSlice) { f.model.SetSlice(s) },
			func(s *discovery.EndpointSlice) { f.model.DeleteSlice(s.Namespace, s.Name) },
		)); err != nil {
			return err
		}
		synced = append(synced, svc.HasSynced, slices.HasSynced)
	}
	failing := informers.NewSharedInformerFactoryWithOptions(f.admin, 0,
		informers.WithTransform(cache.TransformFunc(dropManagedFields)),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelSimFail + "=true" }))
	nodes := failing.Core().V1().Nodes().Informer()
	if _, err := nodes.AddEventHandler(handler(
		func(n *corev1.Node) { f.failures.setLabelled(n.Name, true) },
		func(n *corev1.Node) { f.failures.setLabelled(n.Name, false) },
	)); err != nil {
		return err
	}
	synced = append(synced, nodes.HasSynced)
	factory.Start(ctx.Done())
	failing.Start(ctx.Done())
	return waitSynced(ctx, "Services, EndpointSlices and nodes", synced...)
}

// watchAgentPods runs each node's agent while the node's agent pod is
// Running: one informer for the whole fleet. Its store, indexed by node,
// tells a node adopted later whether its pod runs already.
func (f *Fleet) watchAgentPods(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(f.admin, 0,
		informers.WithNamespace(f.s.AgentNamespace),
		informers.WithTransform(cache.TransformFunc(dropManagedFields)),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelAgentApp }))
	pods := factory.Core().V1().Pods().Informer()
	if err := pods.AddIndexers(cache.Indexers{podNodeIndex: podNode}); err != nil {
		return err
	}
	if _, err := pods.AddEventHandler(handler(f.podChanged, f.podDeleted)); err != nil {
		return err
	}
	f.pods = pods.GetIndexer()
	factory.Start(ctx.Done())
	return waitSynced(ctx, "agent pods", pods.HasSynced)
}

const podNodeIndex = "node"

func podNode(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		return []string{p.Spec.NodeName}, nil
	}
	return nil, nil
}

func (f *Fleet) podChanged(p *corev1.Pod) {
	f.podMu.Lock()
	defer f.podMu.Unlock()
	f.syncAgentLocked(p.Spec.NodeName)
}

func (f *Fleet) podDeleted(p *corev1.Pod) {
	f.podMu.Lock()
	defer f.podMu.Unlock()
	f.syncAgentLocked(p.Spec.NodeName)
}

// syncAgentLocked runs node's agent for the oldest of its agent pods that
// runs and is not being deleted (a pod being deleted has its containers
// stopped by the kubelet), or none. The DaemonSet controller can create a
// second pod on a node (two deletions in a row, the API server restarted
// between its create and its watch), and keeps the oldest once it sees
// both: following the newest, the simulated node stopped its agent when
// that one was deleted, and never started it for the pod kept (the chaos
// soak's node whose agent pods were deleted twice, then stood Applying
// until nodeTimeout). The informer's store already holds the change.
func (f *Fleet) syncAgentLocked(node string) {
	n := f.nodes.get(node)
	if n == nil {
		return
	}
	var keep *corev1.Pod
	objs, _ := f.pods.ByIndex(podNodeIndex, node)
	for _, obj := range objs {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		if keep == nil || olderPod(p, keep) {
			keep = p
		}
	}
	if keep == nil {
		n.noPod()
		return
	}
	n.podRunning(keep.Name, keep.UID, literalEnv(keep))
}

// literalEnv is the pod's first container's variables that have a value of
// their own (not taken from a field or a Secret).
func literalEnv(p *corev1.Pod) map[string]string {
	env := map[string]string{}
	if len(p.Spec.Containers) == 0 {
		return env
	}
	for _, e := range p.Spec.Containers[0].Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	return env
}

// olderPod: a was created before b (by name when in the same second, as
// the DaemonSet controller breaks the tie).
func olderPod(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// handler adapts typed set/delete functions to an informer, including
// deletions the informer saw only as a tombstone after a relist.
func handler[T any](set, del func(T)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { typed(obj, set) },
		UpdateFunc: func(_, obj any) { typed(obj, set) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			typed(obj, del)
		},
	}
}

func typed[T any](obj any, f func(T)) {
	if t, ok := obj.(T); ok {
		f(t)
	}
}

// dropManagedFields: the fleet keeps thousands of objects and reads none of
// their managedFields.
func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.ObjectMetaAccessor); ok {
		m.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}

func waitSynced(ctx context.Context, what string, synced ...cache.InformerSynced) error {
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s never synced", what)
	}
	return nil
}
