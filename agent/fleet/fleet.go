// Package fleet is the simulated Windows fleet (cmd/winpool-fleet,
// hack/sim.sh): kwok-managed Nodes that look like Windows Server nodes, each
// with a simulated machine (fakewin.Machine) that the real agent code drives, under
// the identity of the node's agent pod. The fleet plays what is not the
// agent: the machine, the kubelet (nodeInfo, Ready across reboots) and HNS
// (what kube-proxy would have programmed, package hnsmodel).
package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"winpool.dev/agent/fleet/hnsmodel"
	"winpool.dev/agent/internal/agent"
	"winpool.dev/agent/internal/report"
	"winpool.dev/agent/internal/runtimeswap"
)

// Fleet is one running simulated fleet.
type Fleet struct {
	s     *Settings
	log   *slog.Logger
	ctx   context.Context
	admin kubernetes.Interface
	// reports are the agents' reports, read with the fleet's own rights.
	reports report.Client
	clients *agentClients
	kubelet *kubelet
	model   *hnsmodel.Model
	// programming is each node's kube-proxy working through the model's
	// changes at its release's pace.
	programming *hnsmodel.Programming
	failures    *failures
	// dir holds the machines' C: folders (and the kubelets' kubeconfig).
	dir string
	// nodes are the nodes the fleet plays: those it created or found at
	// start, then those added to the cluster while it runs, less those
	// deleted.
	nodes nodeSet
	// podMu serialises the agent-pod handler with adopting and forgetting
	// nodes, so that a node's agent pod is seen exactly once: by the handler
	// or by the adoption's look at the pod store.
	podMu sync.Mutex
	// pods is the agent pods' store, indexed by node (podNodeIndex).
	pods cache.Indexer
	// retrack tells the HNS model of nodes adopted or forgotten; nil unless
	// the model is fed (--hns auto).
	retrack *retracker
	// runAgent is agent.Run (tests watch it instead).
	runAgent func(context.Context, agent.Options) error

	// started is when the fleet began playing its nodes.
	started time.Time

	agents    sync.WaitGroup
	running   atomic.Int64
	rebooting atomic.Int64
	// tokenFailures counts failed token requests (a missing ServiceAccount
	// fails thousands at once: a few are logged, all are counted).
	tokenFailures atomic.Int64
}

const loggedTokenFailures = 10

func (f *Fleet) tokenFailed(pod string, attempt int, err error) {
	switch n := f.tokenFailures.Add(1); {
	case n < loggedTokenFailures:
		f.log.Warn("no token for an agent pod yet; retrying", "pod", pod, "attempt", attempt, "err", err)
	case n == loggedTokenFailures:
		f.log.Warn("no token for an agent pod yet; retrying; further failures are counted in the fleet stats", "pod", pod, "attempt", attempt, "err", err)
	}
}

const (
	// The fleet's own client plays thousands of kubelets and creates
	// thousands of nodes and tokens at start; the API server's priority and
	// fairness limits still apply.
	adminQPS   = 300
	adminBurst = 600
	// createWorkers bounds node creation (and adoption) in flight.
	createWorkers = 16
)

// AdminConfig reads the admin kubeconfig (KUBECONFIG, or ~/.kube/config).
func AdminConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig (KUBECONFIG or ~/.kube/config): %w", err)
	}
	return cfg, nil
}

// Run creates (or adopts) the fleet's nodes and plays them until ctx ends,
// and with them any Windows node with the fleet's name prefix added while it
// runs; a deleted node it stops playing.
func Run(ctx context.Context, s Settings, admin *rest.Config, log *slog.Logger) error {
	admin = rest.CopyConfig(admin)
	admin.QPS, admin.Burst = adminQPS, adminBurst
	admin.UserAgent = "winpool-fleet"
	client, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		return err
	}
	f := &Fleet{
		s: &s, log: log, ctx: ctx, admin: client, reports: report.NewClient(dyn, s.AgentNamespace),
		kubelet:     &kubelet{client: client},
		failures:    newFailures(&s),
		programming: hnsmodel.NewProgramming(s.HNSCostScale, nil),
		runAgent:    agent.Run,
	}
	f.model = hnsmodel.New(func(node string) bool { return f.nodes.get(node) != nil })
	f.started = time.Now()
	machines, err := f.ensureNodes(ctx)
	if err != nil || s.CreateOnly {
		return err
	}
	if f.clients, err = newAgentClients(admin); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "wpf")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	f.dir = dir
	if f.clients.kubeletKubeconfig, err = writeKubeletKubeconfig(dir, f.clients.host); err != nil {
		return fmt.Errorf("writing the machines' kubelet kubeconfig: %w", err)
	}
	for name, m := range machines {
		n, err := newSimNode(f, name, m)
		if err != nil {
			return fmt.Errorf("building node %s's machine: %w", name, err)
		}
		f.nodes.add(n)
	}
	if s.HNS == HNSAuto {
		f.retrack = newRetracker(f.model)
		go f.retrack.run(ctx)
	}
	if err := f.watchCluster(ctx); err != nil {
		return err
	}
	// What the cluster held at start is programmed already; what changes
	// from now on is queued on every node.
	f.model.OnWork(f.programming.Program)
	for name, m := range machines {
		if m.rebooting {
			// The previous fleet stopped while this node rebooted.
			go f.nodes.get(name).bootedUp("booted")
		}
	}
	if err := f.watchAgentPods(ctx); err != nil {
		return err
	}
	if err := f.watchNodes(ctx); err != nil {
		return err
	}
	log.Info("fleet running", "nodes", f.nodes.len(), "agentNamespace", s.AgentNamespace)
	go f.reportChanges(ctx)
	go f.logStats(ctx, 30*time.Second)
	<-ctx.Done()
	return f.shutDown()
}

// shutDown stops every node's agent (waiting for them a while) and writes
// the machines' statistics.
func (f *Fleet) shutDown() error {
	for _, n := range f.nodes.appendTo(nil) {
		n.stop()
	}
	stopped := make(chan struct{})
	go func() { f.agents.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		f.log.Warn("agents still running after 10s; exiting anyway", "running", f.running.Load())
	}
	if f.s.StatsFile != "" {
		if err := runtimeswap.WriteJSON(f.s.StatsFile, f.stats()); err != nil {
			return fmt.Errorf("--stats-file: %w", err)
		}
	}
	if f.s.LatencyFile != "" {
		l := latencyOf(f.programming.Final())
		h := f.programming.FinalAfterCatchUp()
		after := h.Summary()
		l.AfterCatchUp = &after
		if err := runtimeswap.WriteJSON(f.s.LatencyFile, l); err != nil {
			return fmt.Errorf("--latency-file: %w", err)
		}
	}
	return nil
}

// reportChanges plays the kubelets noticing changes made without a reboot.
func (f *Fleet) reportChanges(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var nodes []*simNode
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		nodes = f.nodes.appendTo(nodes[:0])
		for _, n := range nodes {
			n.reportChanges()
		}
		clear(nodes) // keeps no forgotten node alive until the next tick
	}
}
