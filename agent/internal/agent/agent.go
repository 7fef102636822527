// Package agent is the node agent's loop: it watches its own Node, reads the
// revision ConfigMap the Node's label names, asks decide for the next step,
// does it through the host, and reports in its WindowsNodeReport. It reads
// its Node and never writes it.
package agent

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/operation"
	"winpool.dev/agent/internal/report"
)

// Options configure one agent (one per node; the simulated fleet runs many
// in one process).
type Options struct {
	NodeName string
	// Namespace holds the revision ConfigMaps (the agent pod's own namespace).
	Namespace string
	Client    kubernetes.Interface
	// Reports reads and writes the reports of Namespace.
	Reports report.Client
	// Operations reads winpool's WindowsNodeOperations of Namespace: what
	// it asks of this node.
	Operations operation.Client
	Host       host.Host
	// HNSInterval: how often HNS counts are re-read (written only on change).
	HNSInterval time.Duration
	// MaxAttempts caps update installs per revision.
	MaxAttempts int
	// Version is reported as winpool.dev/agent-version.
	Version string
	Log     *slog.Logger
	// NetworkGrace is how long the agent waits for the HNS network to exist
	// before it reports it missing (0: decide.DefaultNetworkGrace).
	NetworkGrace time.Duration
	// TaskStartGrace is how long a servicing task may take to mark that its
	// program started (0: decide.DefaultTaskStartGrace).
	TaskStartGrace time.Duration
	// TransientRetryAfter is the wait after a first transient Windows Update
	// failure (0: decide.TransientRetryAfter).
	TransientRetryAfter time.Duration
	// Standalone: no operator starts this node; its pool and revision
	// labels are acted on as a start (decide.MayTouch).
	// Off in every DaemonSet the operator writes.
	Standalone bool
	// Stage: download a pending revision's update once its preflight
	// passed, before the operator's start (WINPOOL_STAGING, on unless a
	// pool sets rollout.staging: false).
	Stage bool
	// StageBandwidth paces staging's package downloads, bytes a second (0:
	// none); WINPOOL_STAGING_BANDWIDTH, or DefaultStagingBandwidth.
	StageBandwidth int64
	// PatchCheckEvery: how often to search the update source for the newest
	// cumulative update, for a pool whose patch level follows it
	// (PatchCheckEnv; 0: never).
	PatchCheckEvery time.Duration
	// Events: record a Kubernetes Event on the Node when the agent starts
	// applying, reboots, fails or succeeds (needs create on events in
	// Namespace).
	Events bool
}

// Defaults for Options left zero.
const (
	DefaultHNSInterval = 15 * time.Second
	DefaultMaxAttempts = 3
	DefaultVersion     = "dev"
)

// tuning is what tests shorten or watch; Run uses defaultTuning.
type tuning struct {
	retryInitial, retryMax time.Duration
	// recheck is how soon a decision that waits for the host (a servicing
	// task, the HNS network) is made again.
	recheck time.Duration
	// passDone, when set, is called after every pass of the loop that saw the
	// Node, so a test can tell when the agent has acted on what it saw.
	passDone func()
	// preflightDelay is how long the agent waits before it judges a target
	// that replaced the one it judged (nil: no wait).
	preflightDelay func() time.Duration
}

var defaultTuning = tuning{retryInitial: 500 * time.Millisecond, retryMax: 30 * time.Second, recheck: 10 * time.Second,
	preflightDelay: func() time.Duration { return rand.N(preflightSpread) }}

// Run works until ctx ends. It survives API errors (retries with backoff).
// After it reboots the host it only waits for ctx to end, so a restart of
// the process cannot run a second install before the reboot happens.
func Run(ctx context.Context, o Options) error { return run(ctx, o, defaultTuning) }

type agent struct {
	o       Options
	t       tuning
	log     *slog.Logger
	watcher *nodeWatcher
	ops     *opWatcher
	targets *targetWatcher
	reports *reportWatcher
	view    nodeView
	configs configCache
	rep     reportState

	// The host as last observed; obsKnown once an Observe succeeded.
	obs      host.Observed
	obsKnown bool
	obsErr   string
	// obsFailingSince: when reads of the host began failing (zero while
	// they work).
	obsFailingSince time.Time
	// cniMissingSince: when the agent first saw no HNS network (zero while
	// there is one).
	cniMissingSince time.Time

	hns      host.HNSCounts
	hnsKnown bool
	hnsErr   string
	// hnsBoot is the Node's bootID when hns was read ("" before the Node
	// was seen); hnsSince: when these counts were first read in that boot.
	hnsBoot  string
	hnsSince time.Time
	// hnsRepair is the restart of kube-proxy made in this agent's life (the
	// report keeps earlier ones); nil: none.
	hnsRepair *report.HNSRepair

	// csiPod is the CSI Proxy version winpool's CSI Proxy pod runs on this
	// node ("" none), read while a revision asks for one; csiWrong* is since
	// when, for which revision, it has not been the one asked for.
	csiPod        string
	csiWrongRev   string
	csiWrongSince time.Time

	// pre is the last preflight of the pool's target revision.
	pre preflightVerdict
	// preHold spreads the first judgement of a new target (preflight.go);
	// preflightDue fires when it is due (nil when nothing is held).
	preHold      preflightHold
	preflightDue <-chan time.Time
	// searching is the revision whose preflight waits for the host's
	// Windows Update search, searchNext when it is asked again.
	searching  string
	searchNext time.Time

	// staging is the download of the cleared revision (staging.go);
	// stageDue fires when it is asked again.
	staging  stagingState
	stageDue <-chan time.Time
	// stageDone is closed when the running staging ends.
	stageDone <-chan struct{}

	// offer is the newest cumulative update the update source offers, for
	// a pool whose patch level follows it (offer.go).
	offer *report.Offer
}

func run(ctx context.Context, o Options, t tuning) error {
	switch {
	case o.NodeName == "":
		return errors.New("agent: NodeName is empty")
	case o.Client == nil:
		return errors.New("agent: Client is nil")
	case o.Host == nil:
		return errors.New("agent: Host is nil")
	case o.Reports == nil:
		return errors.New("agent: Reports is nil")
	case o.Operations == nil:
		return errors.New("agent: Operations is nil")
	}
	if o.HNSInterval <= 0 {
		o.HNSInterval = DefaultHNSInterval
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	log := o.Log.With("node", o.NodeName)
	a := &agent{
		o:       o,
		t:       t,
		log:     log,
		configs: configCache{},
		watcher: newNodeWatcher(o.Client, o.NodeName),
		ops:     newOpWatcher(o.Operations, o.NodeName),
		targets: newTargetWatcher(o.Client, o.Namespace),
		reports: newReportWatcher(o.Reports, o.NodeName),
	}
	return a.loop(ctx)
}

func (a *agent) loop(ctx context.Context) error {
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go a.watcher.run(watchCtx)
	go a.ops.run(watchCtx)
	go a.targets.run(watchCtx)
	go a.reports.run(watchCtx)

	// Observed before the Node arrives, so the first report carries them,
	// and the pools' targets listed, so it carries a preflight too.
	a.observe(ctx)
	a.readHNS(ctx)
	a.loadReport(ctx)
	a.keepCountsTime()
	a.waitForTargets(ctx)
	ticker := time.NewTicker(a.o.HNSInterval)
	defer ticker.Stop()

	var st passState
	for {
		tick := false
		select {
		case <-ctx.Done():
			return nil
		case <-a.watcher.changed:
		case <-a.ops.changed:
		case <-a.targets.changed:
		case uid := <-a.reports.deleted:
			a.reportDeleted(uid)
		case <-ticker.C:
			tick = true
			a.observe(ctx)
			a.readHNS(ctx)
		case <-st.recheck:
			tick = true
		case <-a.preflightDue:
			a.preflightDue = nil
		case <-a.stageDue:
			a.stageDue = nil
		case <-a.stageDone:
			a.stageDone = nil
		}
		a.refreshView()
		node := a.view.current()
		if node == nil {
			continue
		}
		if node.Status.NodeInfo.BootID != a.hnsBoot {
			// Counts of another boot say nothing of this one: read them anew,
			// before a report this pass writes carries them.
			a.readHNS(ctx)
		}
		if a.decideIfAsked(ctx, node, &st, tick) == rebooting {
			stopWatch()
			<-ctx.Done()
			return nil
		}
		a.repairHNSIfAsked(ctx, node)
		a.preflight(ctx, node)
		a.stage(ctx, node)
		a.checkOffer(ctx, node)
		if err := a.syncObservations(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, errNodeGone) {
			a.log.Error("cannot report observations", "err", err)
		}
		if a.t.passDone != nil {
			a.t.passDone()
		}
	}
}

// passState is what a pass of the agent's loop leaves the next.
type passState struct {
	// lastRequest is what the Node asked when the agent last decided.
	lastRequest    string
	waitingForHost bool
	// recheck fires when a wait for the host is due.
	recheck <-chan time.Time
}

// decideIfAsked converges when what the Node asks or the agent's report on it
// changed, or a wait for the host is due: the kubelet's status updates are not
// worth a decision.
func (a *agent) decideIfAsked(ctx context.Context, node *corev1.Node, st *passState, tick bool) outcome {
	if a.requestKey(node) == st.lastRequest && !(st.waitingForHost && tick) {
		return settled
	}
	asked := askedKey(a.askOf(node))
	out := a.converge(ctx)
	// A report refused as stale re-read the Node: decide again from
	// it, at once (it is not the agent's own write, so it is new).
	for out == stale && ctx.Err() == nil {
		asked = a.askedNow()
		out = a.converge(ctx)
	}
	switch out {
	case rebooting:
		return out
	case waiting:
		st.waitingForHost = true
		st.recheck = time.After(a.t.recheck)
	default:
		st.waitingForHost, st.recheck = false, nil
	}
	// What the agent wrote itself needs no second decision, but a request
	// that moved while it decided (the operator relabelled the node between
	// the agent's read and its write) does: then decide again.
	st.lastRequest = ""
	if n := a.view.current(); n != nil && askedKey(a.askOf(n)) == asked {
		st.lastRequest = a.requestKey(n)
	}
	return out
}

// targetsWait bounds the wait for the first list of the pools' targets: an
// agent whose API server answers slowly still reports what it observes.
const targetsWait = 30 * time.Second

func (a *agent) waitForTargets(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, targetsWait)
	defer cancel()
	cache.WaitForCacheSync(ctx.Done(), a.targets.synced)
}

func (a *agent) refreshView() { a.view.setWatched(a.watcher.latest()) }

// askedKey is what winpool asks of the agent: the pool and revision, and the
// start they belong to (a retry asks again for the same revision).
func askedKey(q ask) string {
	return q.pool + "\x00" + q.revision + "\x00" + q.startedAt
}

func (a *agent) askedNow() string {
	if n := a.view.current(); n != nil {
		return askedKey(a.askOf(n))
	}
	return ""
}

// requestKey is what a decision depends on: the request, the agent's report
// for it, and whether the operator lets the host be touched.
func (a *agent) requestKey(n *corev1.Node) string {
	r, q := a.lastReport(n), a.askOf(n)
	return askedKey(q) + "\x00" + r.AppliedRevision + "\x00" + string(r.Status) + "\x00" +
		strconv.FormatBool(decide.MayTouch(q.state, q.startedAt, a.o.Standalone))
}

// observe refreshes what the agent knows of the host. A failure keeps the
// last observation (the Node keeps what it has) and is logged once.
func (a *agent) observe(ctx context.Context) error {
	obs, err := a.o.Host.Observe(ctx)
	if err != nil {
		if msg := err.Error(); msg != a.obsErr && ctx.Err() == nil {
			a.obsErr = msg
			a.log.Warn("cannot observe the host", "err", err)
		}
		if a.obsFailingSince.IsZero() {
			a.obsFailingSince = time.Now()
		}
		return err
	}
	a.obsErr, a.obsFailingSince = "", time.Time{}
	a.obs, a.obsKnown = obs, true
	switch {
	case obs.CNIMode != "":
		a.cniMissingSince = time.Time{}
	case a.cniMissingSince.IsZero():
		a.cniMissingSince = time.Now()
	}
	return nil
}

// hnsNow is what HNS held at the last read; nil when never read.
func (a *agent) hnsNow() *host.HNSCounts {
	if !a.hnsKnown {
		return nil
	}
	c := a.hns
	return &c
}

// readHNS refreshes the HNS counts, and which boot of the Node they are of;
// a failure keeps the last ones and is logged once.
func (a *agent) readHNS(ctx context.Context) {
	boot := ""
	if n := a.view.current(); n != nil {
		boot = n.Status.NodeInfo.BootID
	}
	c, err := a.o.Host.HNS(ctx)
	if err != nil {
		if msg := err.Error(); msg != a.hnsErr && ctx.Err() == nil {
			a.hnsErr = msg
			a.log.Warn("cannot read HNS counts", "err", err)
		}
		return
	}
	a.hnsErr = ""
	if !a.hnsKnown || c != a.hns || boot != a.hnsBoot {
		a.hnsSince = time.Now()
	}
	a.hns, a.hnsKnown, a.hnsBoot = c, true, boot
	a.keepCountsTime()
}

// keepCountsTime: counts the report already holds were first read when it
// says (an agent restarted since, or the Node's boot learnt after the
// first read), or at an unknown time (zero) if it says none, so reading
// them again rewrites nothing.
func (a *agent) keepCountsTime() {
	r := a.rep.status.HNS
	if !a.hnsKnown || r == nil || r.BootID != a.hnsBoot || r.LoadBalancers != int64(a.hns.LoadBalancers) || r.Endpoints != int64(a.hns.RemoteEndpoints) {
		return
	}
	a.hnsSince = time.Time{}
	if r.ObservedAt != nil {
		a.hnsSince = r.ObservedAt.Time
	}
}
