package fleet

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"winpool.dev/agent/fleet/hnsmodel"
	"winpool.dev/agent/internal/agent"
	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/host/fakewin"
	"winpool.dev/agent/internal/host/windows"
	"winpool.dev/agent/internal/operation"
	"winpool.dev/agent/internal/report"
)

// simNode is one simulated Windows node: the machine (a fakewin.Machine),
// its kubelet, and the winpool agent that runs on it while the node's agent
// pod does, with that pod's identity, over the agent's real Windows host
// (windows.Host) on that machine.
type simNode struct {
	name string
	uid  types.UID // the Node's; empty if unknown
	f    *Fleet
	host *fakewin.Machine
	// agentHost is the machine as the agent sees it: windows.Host on it.
	agentHost host.Host
	suffix    string // containerd vendor metadata the kubelet reports
	log       *slog.Logger
	// ctx ends when the fleet stops or forgets the node: its agent, token,
	// reboot and kubelet reports end with it.
	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// reported is the nodeInfo the kubelet last wrote.
	reported nodeInfo
	// bootedAt starts HNS's catch-up; zero: up since long ago, caught up.
	bootedAt time.Time
	// networkAt is when a pod sandbox brought back the HNS network a boot
	// removed (FaultAKSHNSReset): HNS's catch-up starts then, not at the boot.
	networkAt time.Time
	// lookingForSandbox: a list of the node's pods is under way.
	lookingForSandbox bool
	lookedAt          time.Time
	rebooting         bool
	reporting         bool
	pod               *agentPod
	run               *agentRun
	// restarts counts the agent restarts FaultAgentRestart made.
	restarts int
	// hnsFaultAt is when its HNS fault (hnsdrift.go) struck; zero: not yet.
	hnsFaultAt time.Time
}

// agentPod is the Running agent pod on the node and its token.
type agentPod struct {
	name  string
	uid   types.UID
	token *podToken
	// env: the agent container's variables with a literal value, as the
	// operator's DaemonSet set them.
	env map[string]string
}

// agentRun is one agent.Run of the node's agent.
type agentRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func newSimNode(f *Fleet, name string, m machine) (*simNode, error) {
	n := &simNode{
		name:   name,
		uid:    m.uid,
		f:      f,
		suffix: m.suffix,
		log:    f.log.With("node", name),
		reported: nodeInfo{
			KernelVersion:           m.build.String(),
			ContainerRuntimeVersion: runtimeVersion(m.containerd, m.suffix),
			BootID:                  m.bootID,
		},
		bootedAt:  m.booted,
		rebooting: m.rebooting,
	}
	n.ctx, n.cancel = context.WithCancel(f.ctx)
	// A folder of its own stands for each machine's C:.
	root, err := os.MkdirTemp(f.dir, "c")
	if err != nil {
		return nil, err
	}
	opts := fakewin.Options{
		Root:       root,
		Build:      m.build,
		Containerd: m.containerd,
		Catalogue: fakewin.Catalogue{InstallTime: f.s.ApplyTime, DownloadTime: f.s.DownloadTime, Hotpatch: f.s.Hotpatch, Fails: f.failures.failsOn(name),
			Approved: wsusApproval(f.s.WSUSApproved)},
		OnReboot: n.reboot,
	}
	opts.HNS = n.hnsCounts()
	f.s.Profile.shape(&opts, m.cni)
	f.s.Faults.shape(name, &opts)
	if f.s.Faults.On(FaultHostEnv, name) {
		kubeconfig := filepath.Join(root, "ProgramData", "kubernetes", "kubeconfig")
		if err := writeKubeconfig(kubeconfig, f.clients.host, hostEnvToken); err != nil {
			return nil, err
		}
		opts.Environment = map[string]string{"KUBECONFIG": kubeconfig, "HTTPS_PROXY": hostEnvProxy, "HTTP_PROXY": hostEnvProxy}
	}
	if f.s.Faults.On(FaultAgentRestart, name) {
		opts.OnTaskStarted = func(task string) {
			if task != decide.ServicingTaskName {
				return
			}
			select {
			case <-time.After(f.s.ApplyTime / 2):
				n.restartAgent()
			case <-n.ctx.Done():
			}
		}
	}
	machine, err := fakewin.New(opts)
	if err != nil {
		return nil, err
	}
	agentHost, err := windows.NewOn(machine.OS(), windows.Options{SwapProof: swapProof})
	if err != nil {
		machine.Close()
		return nil, err
	}
	n.host, n.agentHost = machine, agentHost
	if !m.rebooting {
		n.mu.Lock()
		n.programmingUpLocked()
		n.mu.Unlock()
	}
	return n, nil
}

// hnsCounts is how the machine's HNS counts are read (--hns), with the
// node's HNS faults and its kube-proxy's DSR.
func (n *simNode) hnsCounts() func() (host.HNSCounts, error) {
	s := n.f.s
	var counts func() (host.HNSCounts, error)
	switch s.HNS {
	case HNSAuto:
		counts = n.hns
	case HNSFixed:
		fixed := s.HNSFixed
		counts = func() (host.HNSCounts, error) { return fixed, nil }
	case HNSOff:
		return func() (host.HNSCounts, error) { return host.HNSCounts{}, errHNSOff }
	}
	if s.Faults.On(FaultHNSChurn, n.name) {
		counts = churning(counts)
	}
	if s.KubeProxyDSR && counts != nil && !s.Faults.On(FaultNoDSR, n.name) {
		counts = withDSR(counts)
	}
	return counts
}

// The simulated swap's proof is the real one, shortened: a fleet of
// thousands cannot settle for 30 s per node.
var swapProof = windows.SwapProof{StartWithin: 2 * time.Second, SettleFor: 300 * time.Millisecond, CheckEvery: 50 * time.Millisecond}

// errHNSOff: a machine whose HNS cannot be read; the agent says so once in
// its log and reports no counts.
var errHNSOff = errors.New("HNS is not simulated in this fleet (--hns off)")

// podRunning is the node's agent pod (name, uid) Running (noPod: none is).
// The agent follows its pod: a new pod is a new agent with a new token.
func (n *simNode) podRunning(name string, uid types.UID, env map[string]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pod != nil && n.pod.uid == uid {
		return
	}
	n.dropPodLocked()
	n.pod = &agentPod{name: name, uid: uid, env: env, token: newPodToken(n.ctx, n.f.admin, n.f.s.AgentNamespace, name, uid, n.f.tokenFailed)}
	if !n.rebooting {
		n.startLocked()
	}
}

// noPod: the node has no agent pod that runs.
func (n *simNode) noPod() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dropPodLocked()
}

// restartAgent is the agent's containers restarting in the same pod (same
// token): the running agent is stopped and a new one started.
func (n *simNode) restartAgent() {
	n.mu.Lock()
	run := n.run
	n.run = nil
	n.mu.Unlock()
	if run == nil {
		return
	}
	run.cancel()
	<-run.done
	n.log.Info("agent restarted (host fault agent-restart)")
	n.mu.Lock()
	defer n.mu.Unlock()
	n.restarts++
	if n.pod != nil && n.run == nil && !n.rebooting {
		n.startLocked()
	}
}

func (n *simNode) dropPodLocked() {
	if n.pod == nil {
		return
	}
	n.pod.token.Stop()
	n.pod = nil
	if n.run != nil {
		n.run.cancel()
		n.run = nil
	}
}

func (n *simNode) startLocked() {
	// A pod event that arrives while the fleet shuts down, or after it
	// forgot the node, starts nothing (Run waits for the agents once every
	// node is stopped).
	if n.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(n.ctx)
	run := &agentRun{cancel: cancel, done: make(chan struct{})}
	n.run = run
	pod := n.pod
	n.f.agents.Add(1)
	go func() {
		defer n.f.agents.Done()
		defer close(run.done)
		defer cancel()
		n.runAgent(ctx, pod)
	}()
}

func (n *simNode) runAgent(ctx context.Context, pod *agentPod) {
	if err := pod.token.Wait(ctx); err != nil {
		return
	}
	cfg, err := n.f.clients.configFor(agentIdentity{node: n.name, token: pod.token.Token, serviceUp: n.serviceUp,
		saDir: n.host.Path(`var\run\secrets\kubernetes.io\serviceaccount`), machineEnv: n.host.OS().Box.Getenv})
	if err != nil {
		n.log.Error("cannot build the agent's client", "err", err)
		return
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		n.log.Error("cannot build the agent's client", "err", err)
		return
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		n.log.Error("cannot build the agent's report client", "err", err)
		return
	}
	stage, err := agent.ParseStaging(pod.env[agent.StagingEnv])
	bandwidth, berr := agent.ParseStagingBandwidth(pod.env[agent.StagingBandwidthEnv])
	patchCheck, perr := agent.ParsePatchCheck(pod.env[agent.PatchCheckEnv])
	if err = errors.Join(err, berr, perr); err != nil {
		// As the agent's main refuses to start.
		n.log.Error("the agent cannot start", "pod", pod.name, "err", err)
		return
	}
	n.f.running.Add(1)
	defer n.f.running.Add(-1)
	n.log.Info("agent started", "pod", pod.name, "uid", pod.uid)
	err = n.f.runAgent(ctx, agent.Options{
		NodeName:        n.name,
		Namespace:       n.f.s.AgentNamespace,
		Client:          client,
		Reports:         report.NewClient(dyn, n.f.s.AgentNamespace),
		Operations:      operation.NewClient(dyn, n.f.s.AgentNamespace),
		Host:            n.agentHost,
		HNSInterval:     n.hnsInterval(),
		MaxAttempts:     3,
		Stage:           stage,
		StageBandwidth:  bandwidth,
		PatchCheckEvery: patchCheck,
		// 0: the agent's own; tests that play transient faults shorten it.
		TransientRetryAfter: n.f.s.TransientRetryAfter,
		Version:             "sim",
		Log:                 n.f.log, // the agent adds the node itself
	})
	n.log.Info("agent stopped", "pod", pod.name, "uid", pod.uid, "err", err)
}

// slowAPIFor is how long after a boot FaultSlowAPI keeps the kubernetes
// Service's ClusterIP from answering: longer than any test's nodeTimeout, so
// an agent that waits for it never reports after its reboot.
const slowAPIFor = 10 * time.Minute

// serviceUp: kube-proxy has programmed this node's load balancer for the
// kubernetes Service (at once, unless FaultSlowAPI).
func (n *simNode) serviceUp() bool {
	if !n.f.s.Faults.On(FaultSlowAPI, n.name) {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.bootedAt.IsZero() || time.Since(n.bootedAt) >= slowAPIFor
}

// hnsChurnInterval is how often an agent under FaultHNSChurn reads HNS: each
// read moves the counts, so each is a write of its report.
const hnsChurnInterval = 50 * time.Millisecond

func (n *simNode) hnsInterval() time.Duration {
	if n.f.s.Faults.On(FaultHNSChurn, n.name) {
		return hnsChurnInterval
	}
	return n.f.s.HNSInterval
}

// churning makes every read of the counts differ from the one before: one
// remote endpoint more on every other read (never fewer than what is
// programmed, so the node's HNS readiness does not flap with it).
func churning(counts func() (host.HNSCounts, error)) func() (host.HNSCounts, error) {
	var reads atomic.Uint64
	return func() (host.HNSCounts, error) {
		c, err := counts()
		c.RemoteEndpoints += int(reads.Add(1) % 2)
		return c, err
	}
}

// reboot is the machine rebooting (the machine calls it on its own goroutine
// when the agent reboots): the agent and the kubelet go down, the node turns
// NotReady, the machine boots the staged update, the kubelet comes back and
// reports the new boot, and the agent's pod's containers start again (same
// pod, same token).
func (n *simNode) reboot(reason string) {
	ctx := n.ctx
	n.mu.Lock()
	n.rebooting = true
	run := n.run
	n.run = nil
	n.mu.Unlock()
	if run != nil {
		run.cancel()
		<-run.done
	}
	n.f.rebooting.Add(1)
	defer n.f.rebooting.Add(-1)
	n.f.programming.Down(n.name)
	n.log.Info("node rebooting", "reason", reason)
	down := readyCondition(false, ShuttingDown)
	if n.f.s.Faults.On(FaultRebootUnknown, n.name) {
		// The kubelet went down before it could say so: the node lifecycle
		// controller's view once its heartbeats stop.
		down = unknownCondition()
	}
	if err := n.f.kubelet.setStatus(ctx, n.name, nil, &down); err != nil && ctx.Err() == nil {
		n.log.Error("cannot report the node NotReady", "err", err)
	}
	select {
	case <-time.After(n.f.s.RebootTime):
	case <-ctx.Done():
		// The fleet stops mid-reboot; the node stays marked, and the next
		// fleet finishes the reboot when it adopts the node. (Or the node
		// was deleted.)
		return
	}
	n.host.Boot()
	n.bootedUp("rebooted")
}

// bootedUp is the kubelet starting after a boot: it reports the machine and
// a new boot ID, Ready, and lets kwok heartbeat the node again; then the
// node's pods run again.
func (n *simNode) bootedUp(what string) {
	ctx := n.ctx
	m := n.host.Stats()
	info := nodeInfo{
		KernelVersion:           m.Build.String(),
		ContainerRuntimeVersion: runtimeVersion(m.Containerd, n.suffix),
		BootID:                  uuid.NewString(),
	}
	up := readyCondition(true, "kubelet is posting ready status")
	if err := n.f.kubelet.setStatus(ctx, n.name, &info, &up); err != nil && ctx.Err() == nil {
		n.log.Error("cannot report the node Ready", "err", err)
	}
	n.mu.Lock()
	n.reported = info
	n.bootedAt = time.Now()
	n.rebooting = false
	n.programmingUpLocked()
	if n.pod != nil && n.run == nil {
		n.startLocked()
	}
	n.mu.Unlock()
	n.log.Info("node "+what, "build", info.KernelVersion, "bootID", info.BootID)
	if err := n.f.kubelet.podsReady(ctx, n.name); err != nil && ctx.Err() == nil {
		n.log.Warn("cannot set the node's pods Ready", "err", err)
	}
	n.setUpSandboxes()
}

// sandboxLookEvery is how often the kubelet of a node without its HNS
// network looks for a pod whose sandbox would bring it back.
const sandboxLookEvery = 2 * time.Second

// setUpSandboxes is the kubelet starting the sandboxes of the node's pods
// that are not on the host network, after a boot or as they arrive: the
// CNI's ADD creates the HNS network a boot removed. Without such a pod
// nothing does, and HNS stays empty. Only nodes missing their network look
// (a list of their pods), at most every sandboxLookEvery.
func (n *simNode) setUpSandboxes() {
	if !n.f.s.Faults.On(FaultAKSHNSReset, n.name) || n.host.Stats().NetworkUp {
		return
	}
	n.mu.Lock()
	if n.rebooting || n.lookingForSandbox || time.Since(n.lookedAt) < sandboxLookEvery {
		n.mu.Unlock()
		return
	}
	n.lookingForSandbox, n.lookedAt = true, time.Now()
	n.mu.Unlock()
	go func() {
		found, err := n.f.kubelet.podNetworked(n.ctx, n.name)
		n.mu.Lock()
		defer n.mu.Unlock()
		n.lookingForSandbox = false
		switch {
		case err != nil:
			if n.ctx.Err() == nil {
				n.log.Warn("cannot list the node's pods", "err", err)
			}
		case found != "" && !n.rebooting:
			n.host.SandboxStarted()
			n.networkAt = time.Now()
			n.programmingUpLocked()
			n.log.Info("HNS network created by a pod sandbox", "pod", found)
		}
	}()
}

// hns is what the node's HNS holds now: nothing right after a boot, then a
// linear catch-up to what kube-proxy programs, over the release's catch-up
// time plus what programming all of it costs.
func (n *simNode) hns() (host.HNSCounts, error) {
	m := n.host.Stats()
	full := n.f.model.Counts(n.name, m.CNIMode == "overlay")
	n.mu.Lock()
	start := n.syncStartLocked()
	n.mu.Unlock()
	sync := n.fullSync(m.Build, full)
	if since := time.Since(start); since < sync {
		return catchUp(full, since, sync), nil
	}
	return n.drifted(full, start.Add(sync), sync, m.KubeProxyStarted), nil
}

// syncStartLocked is when kube-proxy's full sync began: the boot, or the pod
// sandbox that brought the HNS network back after it.
func (n *simNode) syncStartLocked() time.Time {
	if n.networkAt.After(n.bootedAt) {
		return n.networkAt
	}
	return n.bootedAt
}

// fullSync is how long HNS takes to hold full after a boot on this build.
func (n *simNode) fullSync(b host.Build, full host.HNSCounts) time.Duration {
	work := hnsmodel.Work{LoadBalancers: full.LoadBalancers, RemoteEndpoints: full.RemoteEndpoints}
	return n.f.s.CatchUp(b) + n.f.programming.Cost(Rates(b), work)
}

// programmingUpLocked has the node's kube-proxy program changes from now on,
// behind its full sync, unless it has no HNS network to program (a boot
// removed it and no pod sandbox brought it back).
func (n *simNode) programmingUpLocked() {
	m := n.host.Stats()
	if !m.NetworkUp {
		n.f.programming.Down(n.name)
		return
	}
	busyUntil := time.Time{}
	if start := n.syncStartLocked(); !start.IsZero() {
		busyUntil = start.Add(n.fullSync(m.Build, n.f.model.Counts(n.name, m.CNIMode == "overlay")))
	}
	n.f.programming.Up(n.name, Rates(m.Build), busyUntil)
}

// withDSR: every load balancer counts has Direct Server Return.
func withDSR(counts func() (host.HNSCounts, error)) func() (host.HNSCounts, error) {
	return func() (host.HNSCounts, error) {
		c, err := counts()
		c.DSRLoadBalancers = c.LoadBalancers
		return c, err
	}
}

func catchUp(full host.HNSCounts, since, total time.Duration) host.HNSCounts {
	if since >= total {
		return full
	}
	f := float64(since) / float64(total)
	return host.HNSCounts{
		LoadBalancers:   int(float64(full.LoadBalancers) * f),
		RemoteEndpoints: int(float64(full.RemoteEndpoints) * f),
	}
}

// reportChanges is the kubelet noticing the machine changed without a
// reboot (containerd upgraded in place; an update that needed no reboot).
// Called every second for every node: it writes only on a change, and never
// waits for the API.
func (n *simNode) reportChanges() {
	n.setUpSandboxes()
	ctx := n.ctx
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.rebooting || n.reporting {
		return
	}
	m := n.host.Stats()
	now := nodeInfo{KernelVersion: m.Build.String(), ContainerRuntimeVersion: runtimeVersion(m.Containerd, n.suffix)}
	if n.f.s.Faults.On(FaultKubeletStaleKernel, n.name) && n.reported.KernelVersion != "" {
		// winstats' startMonitoring reads the build once, at the kubelet's
		// start (bootedUp): nothing short of a restart reads it again.
		now.KernelVersion = n.reported.KernelVersion
	}
	if now.KernelVersion == n.reported.KernelVersion && now.ContainerRuntimeVersion == n.reported.ContainerRuntimeVersion {
		return
	}
	n.reporting = true
	go func() {
		err := n.f.kubelet.setStatus(ctx, n.name, &now, nil)
		n.mu.Lock()
		n.reporting = false
		if err == nil {
			n.reported.KernelVersion, n.reported.ContainerRuntimeVersion = now.KernelVersion, now.ContainerRuntimeVersion
		}
		n.mu.Unlock()
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("cannot report the machine's versions", "err", err)
			}
		} else {
			n.log.Info("versions reported", "build", now.KernelVersion, "runtime", now.ContainerRuntimeVersion)
		}
	}()
}

// stop ends the node's agent, token renewal, reboot and kubelet reports
// (the fleet shuts down, or forgets the node).
func (n *simNode) stop() {
	n.cancel()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dropPodLocked()
}
