package fleet

import (
	"context"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"winpool.dev/agent/fleet/hnsmodel"
)

// LabelWindows selects the Windows nodes (the fleet's among them).
const LabelWindows = "kubernetes.io/os=windows"

// nodeSet is the fleet's nodes by name. Nodes come and go while the fleet
// runs, and the agent-pod handler, the HNS model, the kubelets' reports, the
// stats and the shutdown all read it; reads take a shared lock only.
type nodeSet struct {
	mu sync.RWMutex
	m  map[string]*simNode
}

func (s *nodeSet) get(name string) *simNode {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m[name]
}

func (s *nodeSet) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// add adds n unless a node of its name is there already.
func (s *nodeSet) add(n *simNode) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*simNode{}
	}
	if s.m[n.name] != nil {
		return false
	}
	s.m[n.name] = n
	return true
}

// remove removes n if it is still the node of its name.
func (s *nodeSet) remove(n *simNode) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[n.name] != n {
		return false
	}
	delete(s.m, n.name)
	return true
}

// appendTo appends every node to buf (a snapshot to work through without
// holding the lock).
func (s *nodeSet) appendTo(buf []*simNode) []*simNode {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, n := range s.m {
		buf = append(buf, n)
	}
	return buf
}

// watchNodes follows the cluster's Windows nodes that carry the fleet's name
// prefix, whoever created them: a node added while the fleet runs is adopted
// as one found at start is, and a deleted one (or one no longer labelled
// Windows) is forgotten, its agent stopped. One informer; the prefix is
// filtered here, the API cannot. Returns once synced, having forgotten the
// nodes that went away since the fleet started.
func (f *Fleet) watchNodes(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(f.admin, 0,
		informers.WithTransform(slimNode(f.s.NamePrefix)),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelWindows }))
	inf := factory.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(handler(f.nodeChanged, f.nodeDeleted)); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if err := waitSynced(ctx, "nodes", inf.HasSynced); err != nil {
		return err
	}
	store := inf.GetStore()
	for _, n := range f.nodes.appendTo(nil) {
		if _, exists, _ := store.GetByKey(n.name); !exists {
			f.forget(n, "the node is gone (or no longer labelled "+LabelWindows+")")
		}
	}
	return nil
}

func (f *Fleet) nodeChanged(node *corev1.Node) {
	if !strings.HasPrefix(node.Name, f.s.NamePrefix) {
		return
	}
	if n := f.nodes.get(node.Name); n != nil {
		if n.uid == "" || node.UID == "" || n.uid == node.UID {
			return
		}
		// Deleted and created again while the watch was away: a new machine.
		f.forget(n, "the node was replaced")
	}
	f.adopt(node)
}

func (f *Fleet) nodeDeleted(node *corev1.Node) {
	if n := f.nodes.get(node.Name); n != nil && (node.UID == "" || n.uid == "" || n.uid == node.UID) {
		f.forget(n, "the node was deleted")
	}
}

// adopt plays a node the fleet did not know, as it adopts one it finds at
// start: the machine the node describes, HNS tracked, and its agent once its
// agent pod runs. The pod may have been seen before the node: the pod store
// says.
func (f *Fleet) adopt(node *corev1.Node) {
	m, notes := machineOf(node, f.s, f.reportedCNI(node.Name))
	for _, note := range notes {
		f.log.Warn("adopting a node: "+note, "node", node.Name)
	}
	n, err := newSimNode(f, node.Name, m)
	if err != nil {
		f.log.Error("cannot build the machine of a node", "node", node.Name, "err", err)
		return
	}
	f.podMu.Lock()
	if !f.nodes.add(n) {
		f.podMu.Unlock()
		n.cancel()
		return
	}
	n.log.Info("node adopted", "uid", m.uid, "build", m.build.String(),
		"runtime", runtimeVersion(m.containerd, m.suffix), "bootID", m.bootID, "rebooting", m.rebooting)
	if f.pods != nil {
		f.syncAgentLocked(node.Name)
	}
	f.podMu.Unlock()
	f.retrack.add(node.Name)
	if m.rebooting {
		// It was mid-reboot when another fleet stopped playing it.
		go n.bootedUp("booted")
	}
}

// forget stops playing a node: its agent and token renewal stop, and HNS no
// longer tracks it.
func (f *Fleet) forget(n *simNode, why string) {
	f.podMu.Lock()
	removed := f.nodes.remove(n)
	f.podMu.Unlock()
	if !removed {
		return
	}
	n.stop()
	f.programming.Forget(n.name)
	f.retrack.add(n.name)
	n.log.Info("node forgotten: "+why, "uid", n.uid)
}

// slimNode keeps of a node only what adopting it reads (the node's name and
// UID, the machine in nodeInfo): the fleet keeps thousands.
func slimNode(prefix string) cache.TransformFunc {
	return func(obj any) (any, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil
		}
		out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
		}}
		if !strings.HasPrefix(n.Name, prefix) {
			return out, nil
		}
		if shuttingDown(n) {
			out.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Message: ShuttingDown}}
		}
		out.Status.NodeInfo = corev1.NodeSystemInfo{
			KernelVersion:           n.Status.NodeInfo.KernelVersion,
			ContainerRuntimeVersion: n.Status.NodeInfo.ContainerRuntimeVersion,
			BootID:                  n.Status.NodeInfo.BootID,
		}
		return out, nil
	}
}

// retracker tells the HNS model of nodes it starts or stops tracking,
// batched: one pass over the model's slices serves every node that came or
// went meanwhile (deleting a fleet's thousands of nodes would otherwise cost
// thousands of passes).
type retracker struct {
	model *hnsmodel.Model
	wake  chan struct{}

	mu      sync.Mutex
	pending []string
}

func newRetracker(model *hnsmodel.Model) *retracker {
	return &retracker{model: model, wake: make(chan struct{}, 1)}
}

// add queues a node; nil (the model is not fed: --hns off or fixed) ignores it.
func (r *retracker) add(node string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.pending = append(r.pending, node)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *retracker) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		r.mu.Lock()
		batch := r.pending
		r.pending = nil
		r.mu.Unlock()
		r.model.Retrack(batch...)
	}
}
