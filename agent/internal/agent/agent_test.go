package agent

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
	"winpool.dev/agent/internal/report"
)

// counters is the state on the host without the record of what was installed.
func counters(st host.State) host.State {
	st.Installed = nil
	return st
}

func TestFullApplyAcrossReboot(t *testing.T) {
	rebooted := make(chan string, 1)
	o := behindHost()
	o.OnReboot = func(reason string) { rebooted <- reason }
	machine := newMachine(o)
	h := newHarness(t, machine, requestedR1(), revisionConfigMap(revisionR1()))

	first := h.start(h.options())
	var reason string
	select {
	case reason = <-rebooted:
	case <-time.After(10 * time.Second):
		t.Fatalf("no reboot; node says %q", h.value(keyApplyMessage))
	}
	// The install's report announced the reboot its install asked for: no
	// write of its own (the kubelet shows the reboot).
	n := h.reported()
	if want := "installing the update to 10.0.20348.2762 from Windows Update, then rebooting if it asks"; n[keyApplyStatus] != string(names.StatusApplying) ||
		!strings.Contains(n[keyApplyMessage], want) || reason != decide.ReasonInstallAsked {
		t.Errorf("at the reboot (reason %q) the report says %s: %q, want Applying: %q…", reason, n[keyApplyStatus], n[keyApplyMessage], want)
	}
	st, _ := machine.LoadState()
	if cu := st.Installed; len(cu) != 1 || cu[0].KB != "KB5050002" {
		t.Errorf("the state on the host at the reboot records %+v as installed, want the cumulative update", cu)
	}
	if !counters(st).Same(host.State{Revision: "r1", StartedAt: testStart, Attempts: 1, Reboots: 1, RebootedAfter: 1}) {
		t.Errorf("state on the host at the reboot = %+v", st)
	}
	if first.returned() {
		t.Fatal("Run returned after rebooting; a restarted agent could install again before the reboot")
	}
	first.stop(t)

	if got := machine.CompleteReboot(); got != mustBuild("10.0.20348.2762") {
		t.Fatalf("the machine booted %s", got)
	}
	// winpool's CSI Proxy DaemonSet of r1's version runs on the node.
	h.addCSIProxyPod("csi-proxy-r1", "ghcr.io/kubernetes-sigs/sig-windows/csi-proxy:v1.1.3", true)
	h.start(h.options())
	n = h.waitStatus(names.StatusSucceeded)

	want := map[string]string{
		keyAppliedRevision:  "r1",
		keyApplyStatus:      "Succeeded",
		keyApplyMessage:     "revision r1 applied: build 10.0.20348.2762, containerd 1.7.22, cni overlay, csi-proxy 1.1.3",
		keyApplyStartedAt:   testStart,
		keyAgentVersion:     testVersion,
		keyCNIMode:          "overlay",
		keyCSIProxyVersion:  "1.1.3",
		keyRuntimeService:   "containerd",
		keyHNSLoadBalancers: "10",
		keyHNSEndpoints:     "20",
	}
	if !maps.Equal(n, want) {
		t.Errorf("report = %v\nwant %v", n, want)
	}
	// What the first agent's task installed reaches the operator through the
	// agent that runs after the reboot.
	installed := h.storedReport().Status.Apply.Installed
	if len(installed) != 1 || installed[0].KB != "KB5050002" || !strings.HasSuffix(installed[0].Title, "(KB5050002)") ||
		!slices.Equal(installed[0].CveIDs, []string{"CVE-2026-00021", "CVE-2026-00022", "CVE-2026-00023"}) {
		t.Errorf("the report's installed = %+v, want the cumulative update KB5050002 with its title and CVE IDs", installed)
	}
	if m := machine.Machine(); m.Installs != 1 || m.Reboots != 1 || m.Containerd != "1.7.22" {
		t.Errorf("machine = %+v, want one install, one reboot, containerd 1.7.22", m)
	}
	const waiting = "Applying: containerd 1.7.22 is being installed by scheduled task"
	wantReports := []string{
		"Applying: installing the update to 10.0.20348.2762",
		"Applying: upgrading containerd 1.7.20 → 1.7.22",
		// The swap task proves the new runtime for a settle time: the agent waits and says so.
		waiting,
		"Succeeded: revision r1 applied",
	}
	var got []string
	for _, r := range h.reportsWritten() {
		// The task says Scheduled, then Running: the agent may see one or both.
		if len(got) > 0 && strings.HasPrefix(r, waiting) && strings.HasPrefix(got[len(got)-1], waiting) {
			continue
		}
		got = append(got, r)
	}
	if len(got) != len(wantReports) {
		t.Fatalf("reports written:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantReports, "\n"))
	}
	for i := range got {
		if !strings.HasPrefix(got[i], wantReports[i]) {
			t.Errorf("report %d = %q, want %q…", i, got[i], wantReports[i])
		}
	}
	h.assertOnlyAgentWrites()
}

// The operator's start gives the pool's install budget (a WS2019 pool with
// timeouts.install 5h): the agent cuts its servicing task there, not at its
// own 3h, and Task Scheduler's limit follows (twice the budget).
func TestTheServicingTaskRunsUnderTheStartsBudget(t *testing.T) {
	machine := newMachine(behindHost())
	node := requestedR1()
	node.Annotations[names.AnnInstallBudget] = "18000s"
	h := newHarness(t, machine, node, revisionConfigMap(revisionR1()))
	h.start(h.options())
	eventually(t, "the servicing task is registered", func() bool { return machine.m.TaskLimit(decide.ServicingTaskName) != "" })
	if got := machine.Updates(); len(got) != 1 || got[0].Limit != 5*time.Hour {
		t.Errorf("the install asked for %+v, want one request limited to 5h", got)
	}
	if got := machine.m.TaskLimit(decide.ServicingTaskName); got != "PT10H" {
		t.Errorf("Task Scheduler's ExecutionTimeLimit = %q, want PT10H", got)
	}
}

// A restarted agent that reads the counts its report holds keeps the time
// they were first read: nothing to write, and the operator's timing stands.
func TestARestartedAgentKeepsWhenItFirstReadItsCounts(t *testing.T) {
	o := compliantHost()
	o.HNS = func() host.HNSCounts { return host.HNSCounts{LoadBalancers: 40, RemoteEndpoints: 12} }
	h := newHarness(t, newMachine(o), updatedR1(), revisionConfigMap(revisionR1()))
	// What the agent wrote before its restart, an hour ago.
	read := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	spec := specOf(map[string]string{keyAppliedRevision: "r1", keyApplyStatus: "Succeeded", keyAgentVersion: testVersion})
	spec.HNS = &report.HNS{LoadBalancers: 40, Endpoints: 12, ObservedAt: &read}
	h.seedReportSpec(spec)
	opts := h.options()
	opts.HNSInterval = 10 * time.Millisecond // ticks keep the passes coming
	h.start(opts)
	h.waitPasses(3)
	for i, s := range h.reportWrites() {
		if s.HNS == nil || s.HNS.ObservedAt == nil || !s.HNS.ObservedAt.Equal(&read) {
			t.Errorf("write %d carries HNS %+v, want the counts first read at %v", i, s.HNS, read)
		}
	}
}

func TestRestartOnAppliedNodeWritesOnlyChangedObservations(t *testing.T) {
	applied := map[string]string{
		keyAppliedRevision:  "r1",
		keyApplyStatus:      "Succeeded",
		keyApplyMessage:     "revision r1 applied: build 10.0.20348.2762, containerd 1.7.22, cni overlay, csi-proxy 1.1.3",
		keyAgentVersion:     testVersion,
		keyCNIMode:          "overlay",
		keyCSIProxyVersion:  "1.1.3",
		keyRuntimeService:   "containerd",
		keyCSIProxyHost:     "csiproxy",
		keyHNSLoadBalancers: "10",
		keyHNSEndpoints:     "20",
	}
	cases := []struct {
		name    string
		change  func(anns map[string]string)
		machine func(o *machineOptions)
		want    []map[string]*string
	}{
		{name: "everything current: no write", change: func(map[string]string) {}},
		{
			name: "new agent version and moved HNS count: just those",
			change: func(a map[string]string) {
				a[keyAgentVersion] = "v0.2.0"
				a[keyHNSEndpoints] = "7"
			},
			want: []map[string]*string{{keyAgentVersion: strp(testVersion), keyHNSEndpoints: strp("20")}},
		},
		{
			name:    "a CSI Proxy no longer observed is deleted",
			change:  func(map[string]string) {},
			machine: func(o *machineOptions) { o.CSIProxyVersion = "" },
			want:    []map[string]*string{{keyCSIProxyVersion: nil, keyCSIProxyHost: nil}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			anns := maps.Clone(applied)
			c.change(anns)
			o := compliantHost()
			if c.machine != nil {
				c.machine(&o)
			}
			machine := newMachine(o)
			h := newHarness(t, machine, updatedR1(), revisionConfigMap(revisionR1()))
			h.seedReport(anns)
			r := h.start(h.options())
			h.waitPasses(1)
			r.stop(t)

			got := h.reportChanges()
			if len(got) != len(c.want) {
				t.Fatalf("patches %v, want %v", describe(got), describe(c.want))
			}
			for i := range got {
				if !maps.EqualFunc(got[i], c.want[i], func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }) {
					t.Errorf("patch %d = %v, want %v", i, describe(got[i:i+1]), describe(c.want[i:i+1]))
				}
			}
			if m := machine.Machine(); m.Installs != 0 || m.Reboots != 0 {
				t.Errorf("an applied node's host was worked on: %+v", m)
			}
			h.assertOnlyAgentWrites()
		})
	}
}

func TestFailuresAreReported(t *testing.T) {
	cases := []struct {
		name    string
		host    func() host.Host
		objects func() []runtime.Object
		message []string
	}{
		{
			name: "servicing fails",
			host: func() host.Host {
				o := behindHost()
				o.InstallExitCode = func(host.Build) int { return exitInstallFailed }
				return newMachine(o)
			},
			message: []string{"servicing exited 0x800F0922 (2148469026) installing Windows Update: ", "Cumulative Update for Microsoft server operating system version 21H2", "CBS.log"},
		},
		{
			name: "update not applicable",
			host: func() host.Host {
				o := behindHost()
				o.InstallExitCode = func(host.Build) int { return 0x800F081E }
				return newMachine(o)
			},
			message: []string{"update not applicable to this host (0x800F081E)"},
		},
		{
			name:    "revision ConfigMap missing",
			host:    func() host.Host { return newMachine(compliantHost()) },
			objects: func() []runtime.Object { return []runtime.Object{requestedR1()} },
			message: []string{"ConfigMap winpool-agents/winpool-win22-r1 does not exist"},
		},
		{
			name: "host call fails",
			host: func() host.Host {
				o := compliantHost()
				o.Containerd = "1.7.20"
				return failingContainerd{newMachine(o)}
			},
			message: []string{"installing containerd 1.7.22: msiexec exited 1603"},
		},
		{
			name: "another Windows release",
			host: func() host.Host {
				o := behindHost()
				o.Build = mustBuild("10.0.17763.6532")
				return newMachine(o)
			},
			message: []string{"node runs 10.0.17763.6532, revision wants 10.0.20348.2762"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objects := []runtime.Object{requestedR1(), revisionConfigMap(revisionR1())}
			if c.objects != nil {
				objects = c.objects()
			}
			h := newHarness(t, c.host(), objects...)
			h.start(h.options())
			n := h.waitStatus(names.StatusFailed)
			for _, m := range c.message {
				if !strings.Contains(n[keyApplyMessage], m) {
					t.Errorf("message %q lacks %q", n[keyApplyMessage], m)
				}
			}
			if n[keyAppliedRevision] != "r1" {
				t.Errorf("applied-revision = %q, want r1", n[keyAppliedRevision])
			}
			if fh, ok := h.host.(*testMachine); ok && fh.Machine().Reboots != 0 {
				t.Errorf("a failed apply rebooted the host %d times", fh.Machine().Reboots)
			}
			h.assertOnlyAgentWrites()
		})
	}
}

type failingContainerd struct{ *testMachine }

func (failingContainerd) UpgradeContainerd(context.Context, host.RuntimeRequest) error {
	return errors.New("msiexec exited 1603")
}

func TestHNSCountsAreWrittenOnlyWhenTheyChange(t *testing.T) {
	var lbs atomic.Int64
	lbs.Store(10)
	o := compliantHost()
	o.HNS = func() host.HNSCounts { return host.HNSCounts{LoadBalancers: int(lbs.Load()), RemoteEndpoints: 20} }
	h := newHarness(t, newMachine(o), requestedR1(), revisionConfigMap(revisionR1()))
	opts := h.options()
	opts.HNSInterval = 5 * time.Millisecond
	h.start(opts)

	h.waitStatus(names.StatusSucceeded)
	hnsWrites := func() (lb, ep int) {
		for _, p := range h.reportChanges() {
			if _, ok := p[keyHNSLoadBalancers]; ok {
				lb++
			}
			if _, ok := p[keyHNSEndpoints]; ok {
				ep++
			}
		}
		return lb, ep
	}
	if lb, ep := hnsWrites(); lb != 1 || ep != 1 {
		t.Fatalf("HNS written %d/%d times before any change, want once", lb, ep)
	}
	// Each pass after a tick re-reads HNS; unchanged counts are not written.
	h.waitPasses(5)
	if lb, ep := hnsWrites(); lb != 1 || ep != 1 {
		t.Errorf("unchanged HNS counts written again: %d/%d writes", lb, ep)
	}

	before := time.Now().Truncate(time.Second)
	lbs.Store(12)
	eventually(t, "hns-load-balancers 12", func() bool { return h.value(keyHNSLoadBalancers) == "12" })
	if lb, ep := hnsWrites(); lb != 2 || ep != 1 {
		t.Errorf("after one count moved: %d load-balancer and %d endpoint writes, want 2 and 1", lb, ep)
	}
	// When the moved counts were first read, for the operator to time its verdict from.
	if at := h.storedReport().Status.HNS.ObservedAt; at == nil || at.Time.Before(before) || at.Time.After(time.Now()) {
		t.Errorf("observedAt %v, want the time of the read that saw 12 (after %v)", at, before)
	}
	h.assertOnlyAgentWrites()
}

// A report someone deleted is written again whole at once, its apply
// result kept: winpool would otherwise take the node for one whose agent
// never reported, and the host is not worked on again.
func TestADeletedReportIsWrittenAgain(t *testing.T) {
	machine := newMachine(compliantHost())
	h := newHarness(t, machine, requestedR1(), revisionConfigMap(revisionR1()))
	h.start(h.options())
	want := h.waitStatus(names.StatusSucceeded)
	h.deleteReport()
	eventually(t, "the report written again", func() bool { return h.storedReport() != nil })
	if got := h.reported(); !maps.Equal(got, want) {
		t.Errorf("report written again = %v\nwant %v", got, want)
	}
	if m := machine.Machine(); m.Installs != 0 || m.Reboots != 0 {
		t.Errorf("the host was worked on again: %+v", m)
	}
	h.assertOnlyAgentWrites()
}

// A report deleted and created again by someone else before the agent's own
// create (a deletion its watch shows late, or a person's kubectl apply of an
// old copy): the create finds it there, and the agent writes its status over
// what that one says, its apply result kept.
func TestAReportCreatedMeanwhileIsWrittenOverWithTheAgentsStatus(t *testing.T) {
	machine := newMachine(compliantHost())
	h := newHarness(t, machine, requestedR1(), revisionConfigMap(revisionR1()))
	var armed, recreated atomic.Bool
	h.dyn.PrependReactor("create", "windowsnodereports", func(k8stesting.Action) (bool, runtime.Object, error) {
		if armed.Load() && recreated.CompareAndSwap(false, true) {
			stale := &report.Report{Status: report.Status{AgentVersion: "0.0.1",
				Apply: &report.Apply{Revision: "r0", Status: names.StatusFailed, Message: "a copy from last month"}}}
			stale.Name, stale.Namespace = testNode, testNamespace
			stale.APIVersion, stale.Kind = report.Resource.GroupVersion().String(), report.Kind
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stale)
			if err == nil {
				err = h.dyn.Tracker().Create(report.Resource, &unstructured.Unstructured{Object: obj}, testNamespace)
			}
			if err != nil {
				t.Errorf("creating the stale copy: %v", err)
			}
		}
		return false, nil, nil
	})
	h.start(h.options())
	want := h.waitStatus(names.StatusSucceeded)
	armed.Store(true)
	h.deleteReport()
	eventually(t, "the agent's status over the copy", func() bool { return recreated.Load() && maps.Equal(h.reported(), want) })
	gets := 0
	for _, a := range h.dyn.Actions() {
		if a.GetVerb() == "get" && a.GetResource() == report.Resource {
			gets++
		}
	}
	if gets == 0 {
		t.Error("the create found no report there: the path under test did not run")
	}
	if m := machine.Machine(); m.Installs != 0 || m.Reboots != 0 {
		t.Errorf("the host was worked on again: %+v", m)
	}
	h.assertOnlyAgentWrites()
}

// The operator retries a failed node by starting it again (a new
// started-at); the agent starts the revision over with fresh counters.
func TestOperatorRetryStartsOver(t *testing.T) {
	var failInstalls atomic.Bool
	failInstalls.Store(true)
	o := behindHost()
	o.OnReboot = func(string) {}
	o.InstallExitCode = func(host.Build) int {
		if failInstalls.Load() {
			return exitInstallFailed
		}
		return exitRebootRequired
	}
	machine := newMachine(o)
	node := requestedR1()
	node.Annotations = map[string]string{names.AnnStartedAt: "2026-12-02T10:00:00Z", names.AnnState: names.StateApplying}
	node.Spec.Unschedulable = true // cordoned by the operator's start
	h := newHarness(t, machine, node, revisionConfigMap(revisionR1()))
	h.start(h.options())
	h.waitStatus(names.StatusFailed)

	failInstalls.Store(false)
	h.operatorEdit(func(n *corev1.Node) { n.Annotations[names.AnnStartedAt] = "2026-12-02T11:00:00Z" })
	h.waitReboots(1)
	if st, _ := machine.LoadState(); !counters(st).Same(host.State{Revision: "r1", StartedAt: "2026-12-02T11:00:00Z", Attempts: 1, Reboots: 1, RebootedAfter: 1}) {
		t.Errorf("state after the retry = %+v, want the counters started over", st)
	}
	if got := h.value(keyApplyStartedAt); got != "2026-12-02T11:00:00Z" {
		t.Errorf("the report answers start %q, want the retry's", got)
	}
}

// An install can outlive the operator's patience: nodeTimeout fails the node,
// a person retries it, and the operator starts it again (a new started-at)
// while the first install still runs. That install's failure answers the
// earlier start: it is never written as the answer to the retry (which the
// operator would fail again at once); the agent starts the retry instead,
// with fresh counters.
func TestAReportForAnEarlierAttemptNeverLandsOnARetry(t *testing.T) {
	const first, retry = "2026-12-02T10:00:00Z", "2026-12-02T10:40:00Z"
	release := make(chan struct{})
	var installs atomic.Int64
	o := behindHost()
	o.OnReboot = func(string) {}
	o.InstallExitCode = func(host.Build) int {
		if installs.Add(1) == 1 {
			<-release
			return exitInstallFailed
		}
		return exitRebootRequired
	}
	machine := newMachine(o)
	node := requestedR1()
	node.Annotations = map[string]string{names.AnnStartedAt: first, names.AnnState: names.StateApplying}
	node.Spec.Unschedulable = true // cordoned by the operator's start
	h := newHarness(t, machine, node, revisionConfigMap(revisionR1()))
	h.start(h.options())
	eventually(t, "the first install to run", func() bool { return installs.Load() == 1 })

	h.operatorEdit(func(n *corev1.Node) { n.Annotations[names.AnnStartedAt] = retry })
	close(release)
	h.waitReboots(1)
	// The first install's failure may still be written if it was decided before the agent's watch
	// delivered the retry, but only ever as the answer to the first start, which winpool never reads
	// as the retry's.
	for _, s := range h.reportWrites() {
		if a := s.Apply; a != nil && a.Status == names.StatusFailed && a.StartedAt != first {
			t.Errorf("a failure was written as the answer to start %q: %s", a.StartedAt, a.Message)
		}
	}
	if st, _ := machine.LoadState(); !counters(st).Same(host.State{Revision: "r1", StartedAt: retry, Attempts: 1, Reboots: 1, RebootedAfter: 1}) {
		t.Errorf("state after the retry = %+v, want the counters started over", st)
	}
	h.assertOnlyAgentWrites()
}

// A read of the host that fails for a moment (containerd --version under
// TiWorker's load) is waited out: the agent says what it could not read and
// looks again at its next tick, and the node rolls; it is not Failed.
func TestFailedHostReadsAreWaitedOut(t *testing.T) {
	o := behindHost()
	o.OnReboot = func(string) {}
	o.ReadFails = func(n int) error {
		if n%3 == 2 {
			return errors.New("containerd --version: context deadline exceeded")
		}
		return nil
	}
	h := newHarness(t, newMachine(o), requestedR1(), revisionConfigMap(revisionR1()))
	opts := h.options()
	opts.HNSInterval = 10 * time.Millisecond
	h.start(opts)
	h.waitReboots(1)
	waited := false
	for _, r := range h.reportsWritten() {
		if strings.HasPrefix(r, "Failed") {
			t.Errorf("a failed read failed the node: %s", r)
		}
		waited = waited || strings.HasPrefix(r, "Applying: cannot read the host (reading the build from the registry: ") &&
			strings.Contains(r, "context deadline exceeded); trying again")
	}
	if !waited {
		t.Errorf("no report said the agent waits for a read; reports: %v", h.reportsWritten())
	}
}

// onReportWrite runs edit (once) when the agent's first report write with
// an apply result is on its way to the API: the operator moving on while
// the agent decided.
func (h *harness) onReportWrite(edit func()) {
	var done atomic.Bool
	react := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if s, ok := writtenSpec(h, a); ok && s.Apply != nil && done.CompareAndSwap(false, true) {
			edit()
		}
		return false, nil, nil
	}
	h.dyn.PrependReactor("create", "windowsnodereports", react)
	h.dyn.PrependReactor("patch", "windowsnodereports", react)
}

// The operator starts the node again (a retry) while the agent's first
// report is on its way: that report lands, answering the first start (which
// winpool then ignores), and the agent decides again for the new start
// before the host is touched.
func TestAReportThatLandsAfterARetryAnswersItsOwnStart(t *testing.T) {
	const first, retry = "2026-12-02T10:00:00Z", "2026-12-02T10:40:00Z"
	o := behindHost()
	o.OnReboot = func(string) {}
	machine := newMachine(o)
	node := requestedR1()
	node.Annotations = map[string]string{names.AnnStartedAt: first, names.AnnState: names.StateApplying}
	node.Spec.Unschedulable = true // cordoned by the operator's start
	h := newHarness(t, machine, node, revisionConfigMap(revisionR1()))
	h.onReportWrite(func() {
		h.operatorEdit(func(n *corev1.Node) { n.Annotations[names.AnnStartedAt] = retry })
	})
	h.start(h.options())
	h.waitReboots(1)
	// The reports with an apply result: a write of observations alone may come first.
	var applies []*report.Apply
	for _, s := range h.reportWrites() {
		if s.Apply != nil {
			applies = append(applies, s.Apply)
		}
	}
	if len(applies) == 0 || applies[0].StartedAt != first {
		t.Fatalf("the first apply report answers %+v, want the first start", applies)
	}
	for _, a := range applies[1:] {
		if a.StartedAt != retry {
			t.Errorf("a later report answers %q, want the retry", a.StartedAt)
		}
	}
	if st, _ := machine.LoadState(); st.StartedAt != retry || st.Attempts != 1 {
		t.Errorf("state = %+v, want the retry's first attempt", st)
	}
	if m := machine.Machine(); m.Installs != 1 {
		t.Errorf("%d installs, want the retry's one", m.Installs)
	}
	if n := h.node(); n.Annotations[names.AnnStartedAt] != retry {
		t.Errorf("started-at = %q: the agent undid the retry", n.Annotations[names.AnnStartedAt])
	}
	h.assertOnlyAgentWrites()
}

// nodeTimeout fails the node (and puts it back into service) while the
// agent's report that it starts installing is on its way: the agent reads its
// Node before it touches the host, and installs nothing on a node in service.
func TestNothingIsInstalledOnANodeTheOperatorFailedMeanwhile(t *testing.T) {
	machine := newMachine(behindHost())
	node := requestedR1()
	node.Annotations = map[string]string{names.AnnStartedAt: "2026-12-02T10:00:00Z", names.AnnState: names.StateApplying}
	node.Spec.Unschedulable = true // cordoned by the operator's start
	h := newHarness(t, machine, node, revisionConfigMap(revisionR1()))
	h.onReportWrite(func() {
		h.operatorEdit(func(n *corev1.Node) { n.Annotations[names.AnnState] = names.StateFailed })
	})
	// Ticks keep the agent's passes coming once it has nothing to do.
	opts := h.options()
	opts.HNSInterval = 20 * time.Millisecond
	h.start(opts)
	eventually(t, "the report written", func() bool { return h.value(keyApplyStatus) != "" })
	h.waitPasses(3)
	if m := machine.Machine(); m.Installs != 0 {
		t.Errorf("%d installs on a node the operator failed and put back into service", m.Installs)
	}
}

func TestSurvivesAPIErrors(t *testing.T) {
	h := newHarness(t, newMachine(compliantHost()), requestedR1(), revisionConfigMap(revisionR1()))
	failFirst := func(verb, resource string, n int64) *atomic.Int64 {
		var calls atomic.Int64
		h.client.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
			if calls.Add(1) <= n {
				return true, nil, apierrors.NewServiceUnavailable("etcd leader changed")
			}
			return false, nil, nil
		})
		return &calls
	}
	lists := failFirst("list", "nodes", 2)
	gets := failFirst("get", "configmaps", 2)
	var writes atomic.Int64
	h.dyn.PrependReactor("create", "windowsnodereports", func(k8stesting.Action) (bool, runtime.Object, error) {
		if writes.Add(1) <= 3 {
			return true, nil, apierrors.NewServiceUnavailable("etcd leader changed")
		}
		return false, nil, nil
	})
	h.start(h.options())
	h.waitStatus(names.StatusSucceeded)
	if lists.Load() < 3 || gets.Load() < 3 || writes.Load() < 4 {
		t.Errorf("calls: %d lists, %d gets, %d report creates; the failures were not retried", lists.Load(), gets.Load(), writes.Load())
	}
}

// A reboot no install of the agent's announced (here a pending reboot left
// by servicing outside winpool) is reported as Rebooting, and that report
// must be on the API before the machine goes down, however long the API
// takes to accept it.
func TestRebootingLandsBeforeTheReboot(t *testing.T) {
	o := behindHost()
	o.RebootPending = true
	statusAtReboot := make(chan string, 1)
	var h *harness
	o.OnReboot = func(string) { statusAtReboot <- h.value(keyApplyStatus) }
	h = newHarness(t, newMachine(o), requestedR1(), revisionConfigMap(revisionR1()))
	var refused atomic.Int64
	refuse := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if s, ok := writtenSpec(h, a); ok && s.Apply != nil && s.Apply.Status == names.StatusRebooting && refused.Add(1) <= 4 {
			return true, nil, apierrors.NewTimeoutError("request timed out", 1)
		}
		return false, nil, nil
	}
	h.dyn.PrependReactor("create", "windowsnodereports", refuse)
	h.dyn.PrependReactor("patch", "windowsnodereports", refuse)
	h.start(h.options())
	select {
	case s := <-statusAtReboot:
		if s != string(names.StatusRebooting) {
			t.Errorf("the report said %q when the host rebooted, want Rebooting", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reboot")
	}
	if refused.Load() < 5 {
		t.Errorf("the Rebooting report was tried %d times; the refusals were not retried", refused.Load())
	}
}

// A Node that has not been given a revision is only observed.
func TestNoRevisionOnlyObserves(t *testing.T) {
	node := testNodeObject(map[string]string{names.LabelPool: testPool}, nil)
	machine := newMachine(behindHost())
	h := newHarness(t, machine, node)
	r := h.start(h.options())
	h.waitPasses(1)
	r.stop(t)
	n := h.reported()
	if _, ok := n[keyApplyStatus]; ok {
		t.Errorf("apply status written without a revision: %v", n)
	}
	if n[keyAgentVersion] != testVersion || n[keyHNSLoadBalancers] != "10" || n[keyCNIMode] != "overlay" {
		t.Errorf("observations missing from the first report: %v", n)
	}
	if m := machine.Machine(); m.Installs != 0 {
		t.Errorf("installs without a revision: %d", m.Installs)
	}
	h.assertOnlyAgentWrites()
}

func TestRunRefusesIncompleteOptions(t *testing.T) {
	h := newHarness(t, newMachine(behindHost()))
	o := h.options()
	o.NodeName = ""
	if err := Run(context.Background(), o); err == nil {
		t.Error("Run accepted an empty NodeName")
	}
}

func describe(ps []map[string]*string) []map[string]string {
	var out []map[string]string
	for _, p := range ps {
		m := map[string]string{}
		for k, v := range p {
			if v == nil {
				m[k] = "<deleted>"
			} else {
				m[k] = *v
			}
		}
		out = append(out, m)
	}
	return out
}

// The operator may move the revision label while the agent decides on the old
// one: the agent's report then lands on a Node that already asks for
// something else. Seen under load with a hand-set bogus revision that the
// operator put back: the agent must decide again, not take the request it
// never looked at for handled.
func TestARequestThatMovesWhileTheAgentDecidesIsDecidedAgain(t *testing.T) {
	bogus := requestedR1()
	bogus.Labels[names.LabelRevision] = "bogus"
	h := newHarness(t, newMachine(compliantHost()), bogus, revisionConfigMap(revisionR1()))
	var moved atomic.Bool
	// The agent's first report (Failed: no ConfigMap for "bogus") reaches the
	// API just after the operator relabelled the node back to r1.
	h.dyn.PrependReactor("create", "windowsnodereports", func(k8stesting.Action) (bool, runtime.Object, error) {
		if moved.CompareAndSwap(false, true) {
			h.operatorEdit(func(n *corev1.Node) { n.Labels[names.LabelRevision] = "r1" })
		}
		return false, nil, nil
	})
	h.start(h.options())
	eventually(t, "the agent to apply r1 after the relabel", func() bool {
		n := h.reported()
		return n[keyAppliedRevision] == "r1" && n[keyApplyStatus] == string(names.StatusSucceeded)
	})
}

// TestCSIProxyIsWaitedForUntilItsPodRuns: the agent installs no CSI Proxy; it
// reports that it waits until the pod of winpool's CSI Proxy DaemonSet of the
// revision's version is Running and ready on its node, and only then succeeds,
// reporting the version the kubelet runs.
func TestCSIProxyIsWaitedForUntilItsPodRuns(t *testing.T) {
	o := compliantHost()
	o.CSIProxyVersion = ""
	h := newHarness(t, newMachine(o), requestedR1(), revisionConfigMap(revisionR1()))
	h.addCSIProxyPod("csi-proxy-old", "ghcr.io/kubernetes-sigs/sig-windows/csi-proxy:v1.1.2", true)
	opts := h.options()
	opts.HNSInterval = 20 * time.Millisecond
	h.start(opts)
	eventually(t, "the agent says it waits for CSI Proxy v1.1.3", func() bool {
		return strings.Contains(h.value(keyApplyMessage), "waiting for CSI Proxy v1.1.3 (running: 1.1.2)")
	})
	if got := h.value(keyApplyStatus); got != string(names.StatusApplying) {
		t.Fatalf("apply-status while waiting = %q, want Applying", got)
	}
	if got := h.value(keyCSIProxyVersion); got != "1.1.2" {
		t.Errorf("csi-proxy-version while the old pod runs = %q, want the observed 1.1.2", got)
	}
	h.deletePod("csi-proxy-old")
	h.addCSIProxyPod("csi-proxy-new", "ghcr.io/kubernetes-sigs/sig-windows/csi-proxy:v1.1.3", false)
	h.addCSIProxyPod("csi-proxy-new", "ghcr.io/kubernetes-sigs/sig-windows/csi-proxy:v1.1.3", true)
	n := h.waitStatus(names.StatusSucceeded)
	if got := n[keyCSIProxyVersion]; got != "1.1.3" {
		t.Errorf("csi-proxy-version = %q, want 1.1.3", got)
	}
	h.assertOnlyAgentWrites()
}

func TestRunningCSIProxyIsWhatTheKubeletRuns(t *testing.T) {
	pod := func(phase corev1.PodPhase, image string, ready bool, label string) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{names.LabelCSIProxyVersion: label}},
			Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
				Name: "csi-proxy", Image: image, Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			}}},
		}
	}
	for _, c := range []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"none", nil, ""},
		{"running and ready: its tag", []corev1.Pod{pod(corev1.PodRunning, "ghcr.io/kubernetes-sigs/sig-windows/csi-proxy:v1.1.3", true, "v9")}, "1.1.3"},
		{"a registry port is not a tag", []corev1.Pod{pod(corev1.PodRunning, "mirror.corp:5000/csi-proxy:v1.1.2", true, "")}, "1.1.2"},
		{"pinned by digest: its version label", []corev1.Pod{pod(corev1.PodRunning, "mirror.corp:5000/csi-proxy@sha256:0123", true, "v1.1.3")}, "1.1.3"},
		{"not ready yet", []corev1.Pod{pod(corev1.PodRunning, "csi-proxy:v1.1.3", false, "")}, ""},
		{"pending", []corev1.Pod{pod(corev1.PodPending, "csi-proxy:v1.1.3", true, "")}, ""},
		{"the running one of two", []corev1.Pod{pod(corev1.PodSucceeded, "csi-proxy:v1.1.2", false, ""), pod(corev1.PodRunning, "csi-proxy:v1.1.3", true, "")}, "1.1.3"},
	} {
		for i := range c.pods {
			c.pods[i].Spec.NodeName = testNode
		}
		if got := runningCSIProxy(c.pods, testNode); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	other := pod(corev1.PodRunning, "csi-proxy:v1.1.3", true, "")
	other.Spec.NodeName = "win-9"
	if got := runningCSIProxy([]corev1.Pod{other}, testNode); got != "" {
		t.Errorf("another node's pod counted: %q", got)
	}
}

// HNS starts empty after a reboot: every report the agent writes once its
// node has rebooted carries counts read in the new boot (the Node's bootID),
// never the counts of the boot before, which winpool would otherwise take
// for a node caught up.
func TestReportsAfterARebootCarryCountsOfTheNewBoot(t *testing.T) {
	o := behindHost()
	o.OnReboot = func(string) {}
	machine := newMachine(o)
	node := requestedR1()
	node.Status.NodeInfo.BootID = "boot-1"
	h := newHarness(t, machine, node, revisionConfigMap(revisionR1()))
	first := h.start(h.options())
	h.waitReboots(1)
	first.stop(t)
	if got := h.value(keyHNSBootID); got != "boot-1" {
		t.Fatalf("before the reboot the counts are of %q, want boot-1", got)
	}
	before := len(h.reportWrites())

	machine.CompleteReboot()
	h.operatorEdit(func(n *corev1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	h.addCSIProxyPod("csi-proxy-r1", "ghcr.io/kubernetes-sigs/sig-windows/csi-proxy:v1.1.3", true)
	h.start(h.options())
	h.waitStatus(names.StatusSucceeded)
	after := h.reportWrites()[before:]
	if len(after) == 0 {
		t.Fatal("no report after the reboot")
	}
	for i, s := range after {
		if s.HNS == nil || s.HNS.BootID != "boot-2" {
			t.Errorf("report %d after the reboot carries counts of %+v, want boot-2's", i, s.HNS)
		}
	}
}

// A revision label set by hand on a pool member the operator never started
// (no state, no start) is not a start: the host is not touched and no apply
// is reported once the agent has decided on that Node; the
// operator's recorded start on the same Node is then acted on. The same label
// on a standalone agent is acted on by itself.
func TestAHandSetRevisionLabelIsNotAStart(t *testing.T) {
	handLabelled := testNodeObject(map[string]string{names.LabelPool: testPool, names.LabelRevision: "r1", "kubernetes.io/os": "windows"}, nil)
	machine := newMachine(behindHost())
	h := newHarness(t, machine, handLabelled, revisionConfigMap(revisionR1()))
	r := h.start(h.options())
	// A finished pass has decided on the labelled Node (ticks bring no new
	// pass while nothing changes, so one is what can be waited for).
	h.waitPasses(1)
	if m := machine.Machine(); m.Installs != 0 || m.Reboots != 0 || m.Containerd != behindHost().Containerd {
		t.Errorf("the host of a node the operator never started was worked on: %+v", m)
	}
	if st := h.value(keyApplyStatus); st != "" {
		t.Errorf("apply status %q reported for a node the operator never started (message %q)", st, h.value(keyApplyMessage))
	}
	h.operatorEdit(func(n *corev1.Node) {
		n.Annotations = map[string]string{names.AnnState: names.StateApplying, names.AnnStartedAt: testStart}
		n.Spec.Unschedulable = true // cordoned by the operator's start
	})
	h.waitStatus(names.StatusApplying)
	r.stop(t)

	standalone := newMachine(behindHost())
	h = newHarness(t, standalone, handLabelled.DeepCopy(), revisionConfigMap(revisionR1()))
	o := h.options()
	o.Standalone = true
	r = h.start(o)
	h.waitStatus(names.StatusApplying)
	r.stop(t)
}

// What a Node carries is no start and no undo: a forged start (the operator's
// annotations, a revision label and a cordon, written by anyone who may patch
// Nodes, the node's own kubelet credential included) and a forged undo on it
// leave the host untouched and report nothing, once the agent has decided on
// that Node; winpool's operation for the same start is then acted on.
func TestAForgedStartOrUndoOnTheNodeIsNotActedOn(t *testing.T) {
	for _, undo := range []string{"", "win-pods"} {
		machine := newMachine(behindHost())
		h := newHarness(t, machine, updatedR1(), revisionConfigMap(revisionR1()))
		r := h.start(h.options())
		h.waitPasses(1)
		h.forgeNode(func(n *corev1.Node) {
			n.Annotations = map[string]string{names.AnnState: names.StateApplying, names.AnnStartedAt: testStart, names.AnnUndo: undo}
			n.Spec.Unschedulable = true
		})
		h.waitPasses(1) // the pass that saw the forged Node
		if m := machine.Machine(); m.Installs != 0 || m.Reboots != 0 || m.Undos != 0 {
			t.Errorf("undo %q: the host was worked on for a forged start: %+v", undo, m)
		}
		if st := h.value(keyApplyStatus); st != "" {
			t.Errorf("undo %q: apply status %q reported for a forged start", undo, st)
		}
		// The same start, now with winpool's operation.
		h.operatorEdit(func(*corev1.Node) {})
		h.waitStatus(names.StatusApplying)
		r.stop(t)
	}
}
