package fleet

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/host/fakewin"
)

// Fault is one way a simulated host is less kind than the default fake
// (--host-faults): each models a behaviour of real Windows nodes, so the
// agent and the operator can be seen failing on it before it is fixed, and
// the suite keeps them fixed.
type Fault string

const (
	// FaultHNSChurn: the node's HNS counts move on every read (a cluster
	// whose Services' endpoints change all the time) and the agent reads them
	// every hnsChurnInterval, so it writes its report in a tight loop, racing
	// every other writer of the Node (the operator, kubectl winpool retry).
	FaultHNSChurn Fault = "hns-churn"
	// FaultReadErrors: one read of the host in three fails for a moment (a
	// slow `containerd --version` under TiWorker's load, an SCM or registry
	// call refused).
	FaultReadErrors Fault = "read-errors"
	// FaultPendingRenames: PendingFileRenameOperations holds an entry that
	// is put back at every boot (Defender, an installer's leftovers).
	FaultPendingRenames Fault = "pending-renames"
	// FaultOvershoot: an update lands on a later revision than the one asked
	// for (the source offered a newer cumulative update).
	FaultOvershoot Fault = "overshoot"
	// FaultUndershoot: an update lands below the revision asked for, every
	// time (the source only has an older one).
	FaultUndershoot Fault = "undershoot"
	// FaultRebootUnknown: a reboot shows as Ready=Unknown (the kubelet went
	// down before it could post NotReady), not Ready=False.
	FaultRebootUnknown Fault = "reboot-unknown"
	// FaultAgentRestart: the agent's pod restarts in the middle of every
	// update install (its own DaemonSet rolling, a kubelet restart, an OOM
	// kill): a new agent process meets the install the old one started.
	FaultAgentRestart Fault = "agent-restart"
	// FaultSSUFirst: the first install of a node brings only a servicing
	// stack update, which needs its own reboot; the build moves with the
	// second.
	FaultSSUFirst Fault = "ssu-first"
	// FaultRuntimeCrashloop: a new containerd answers, then crash-loops
	// while its service (an NSSM wrapper) still says Running; the upgrade
	// task sees it within its settle time and puts the old one back.
	FaultRuntimeCrashloop Fault = "runtime-crashloop"
	// FaultContainerdConfigV1: the node's containerd config.toml is a
	// version 1 file (no version line, short plugin names: a node set up
	// with containerd 1.2 or older), which a jump to containerd 2.x migrates.
	FaultContainerdConfigV1 Fault = "containerd-config-v1"
	// FaultSlowAPI: the kubernetes Service's ClusterIP does not answer for
	// a long while after each boot (kube-proxy has not programmed its HNS
	// load balancer yet: minutes on Windows Server 2019 with thousands of
	// Services); the API server's own address, the kubelet's, does.
	FaultSlowAPI Fault = "slow-api"
	// FaultSourceUnreachable: no update source answers the machine (a
	// proxy or firewall in the way, WSUS down): the agent's preflight
	// blocks the node before it is cordoned.
	FaultSourceUnreachable Fault = "source-unreachable"
	// FaultTaskNotStarted: Task Scheduler accepts every run of the agent's
	// tasks and their program never starts (antivirus or App Control
	// blocking it): the agent fails the node within its task-start grace,
	// naming Task Scheduler's last result.
	FaultTaskNotStarted Fault = "task-not-started"
	// FaultOnBattery: a UPS reports battery power, so Task Scheduler starts
	// no task whose conditions forbid it (the schema's default, and
	// schtasks /Create's); the agent's tasks are defined to start anyway.
	FaultOnBattery Fault = "on-battery"
	// FaultWSUSUnapproved: the update source offers no servicing stack or
	// cumulative update (WSUS has not approved this month's for the node's
	// group): the agent's preflight search blocks the node before its
	// cordon.
	FaultWSUSUnapproved Fault = "wsus-unapproved"
	// FaultWUBusy: the first install fails with WU_E_OPERATIONINPROGRESS
	// (Automatic Updates was installing something): tried again.
	FaultWUBusy Fault = "wu-busy"
	// FaultWSUS503: the first download fails with WSUS's 503
	// (WU_E_PT_HTTP_STATUS_SERVICE_UNAVAIL): tried again.
	FaultWSUS503 Fault = "wsus-503"
	// FaultDownloadReset: the first download is reset by a proxy
	// (ERROR_INTERNET_CONNECTION_ABORTED): tried again.
	FaultDownloadReset Fault = "download-reset"
	// FaultSlowServicing: the install takes slowServicingTime (a Windows
	// Server 2019 cumulative update: scan, a 1.5 GB download, the CBS
	// install), longer than the tests' nodeTimeout; its task beats meanwhile.
	FaultSlowServicing Fault = "slow-servicing"
	// FaultLocalized: Windows Update's titles come back in German (a WSUS
	// or a session in another language); nothing may be chosen by them.
	FaultLocalized Fault = "localized"
	// FaultPendingAfterTarget: the boot that lands the update leaves CBS
	// RebootPending set (a two-phase update): the agent reboots once more
	// before the node is Updated, rather than Windows later, in service.
	FaultPendingAfterTarget Fault = "pending-after-target"
	// FaultAKSHNSReset: every boot removes kube-proxy's HNS network (AKS's
	// boot-time HNS clean-up); Azure CNI creates it again only when a pod
	// sandbox is set up on the node, so a drained node whose remaining pods
	// are all on the host network has none, and HNS programs nothing.
	FaultAKSHNSReset Fault = "aks-hns-reset"
	// FaultServiceDeps: a service the agent knows nothing of depends on
	// containerd (a vendor's log or monitoring agent registered with
	// DependOnService=containerd): the SCM refuses to stop containerd while
	// it runs, so a containerd swap stops it first and starts it last.
	FaultServiceDeps Fault = "service-deps"
	// FaultBadUpdate: every install of the update asked for fails with
	// one result code (badUpdateCode, CBS_E_INSTALLERS_FAILED: a cumulative
	// update whose installer breaks on this image, as a bad month does on
	// every node it reaches): the operator's breaker stops every pool
	// targeting it.
	FaultBadUpdate Fault = "bad-update"
	// FaultInstallFailsOnce: the first install of an update fails with
	// badUpdateCode and every later one succeeds (a component store
	// corruption that DISM /RestoreHealth fixed, a full disk cleaned): the
	// node fails, and an admin's retry lands it.
	FaultInstallFailsOnce Fault = "install-fails-once"
	// FaultHostEnv: the machine's environment, which a HostProcess container
	// inherits, sets KUBECONFIG to the kubelet's credentials (as the EKS AMI
	// does machine-wide) and HTTPS_PROXY/HTTP_PROXY to a proxy that refuses
	// (hostEnvProxy): an agent whose API client followed either would act as
	// the kubelet or reach nothing.
	FaultHostEnv Fault = "host-env"
	// FaultNoDSR: the node's kube-proxy runs without --enable-dsr although
	// the fleet's run with it (--kube-proxy-dsr): an image whose flags differ
	// from what the pool says (networking.kubeProxy.enableDSR).
	FaultNoDSR Fault = "no-dsr"
	// FaultPayloadBlocked: a firewall lets the Windows Update service hosts
	// through and drops its payloads' (payloadHost): the search works, the
	// download after the drain would not.
	FaultPayloadBlocked Fault = "payload-blocked"
	// FaultProxyAuth: the machine's WinHTTP proxy (fleetProxy) asks for
	// authentication (407), which the Windows Update client, as SYSTEM,
	// does not give.
	FaultProxyAuth Fault = "proxy-auth"
	// FaultDownloadCut: the first download of each file the machine fetches
	// over HTTP (containerd's release archive) is cut mid-body, as a proxy
	// resetting a long transfer does: the agent resumes it with a Range
	// request.
	FaultDownloadCut Fault = "download-cut"
	// FaultHotpatchReboots: a hotpatch's install asks for a reboot after
	// all (with --hotpatch enrolled): the agent waits, the node is drained.
	FaultHotpatchReboots Fault = "hotpatch-reboots"
)

// payloadHost is where Windows Update's payloads come from (the agent's
// preflight checks it); fleetProxy the WinHTTP proxy of FaultProxyAuth.
const (
	payloadHost = "download.windowsupdate.com"
	fleetProxy  = "proxy.corp.example:3128"
)

// hostEnvProxy is FaultHostEnv's proxy: the discard port, which refuses.
const hostEnvProxy = "http://127.0.0.1:9"

// hostEnvToken is the kubelet's credential in FaultHostEnv's KUBECONFIG: no
// identity the API server knows, so a request that carries it is refused
// (401) and the audit log says so.
const hostEnvToken = "kubelet-credential-from-the-machine-environment"

// containerdConfigV1 is FaultContainerdConfigV1's config.toml.
const containerdConfigV1 = "[plugins.cri]\n  sandbox_image = \"mcr.microsoft.com/oss/kubernetes/pause:3.6\"\n"

// badUpdateCode is the HRESULT FaultBadUpdate's installs fail with.
const badUpdateCode = 0x800F0922

// faultHelp says in a line what each fault plays (--help).
var faultHelp = map[Fault]string{
	FaultHNSChurn:           "HNS counts move on every read",
	FaultReadErrors:         "one host read in three fails for a moment",
	FaultPendingRenames:     "a PendingFileRenameOperations entry put back at every boot",
	FaultOvershoot:          "an update lands past the revision asked for",
	FaultUndershoot:         "an update lands one revision short, every time",
	FaultRebootUnknown:      "a reboot shows as Ready=Unknown",
	FaultAgentRestart:       "the agent's pod restarts in the middle of every install",
	FaultSSUFirst:           "the first install brings only a servicing stack update",
	FaultRuntimeCrashloop:   "a new containerd answers once, then crash-loops",
	FaultContainerdConfigV1: "containerd's config.toml is a version 1 file",
	FaultSlowAPI:            "the kubernetes Service's ClusterIP is down for minutes after each boot",
	FaultSourceUnreachable:  "no update source answers",
	FaultTaskNotStarted:     "Task Scheduler accepts runs and the task's program never starts",
	FaultOnBattery:          "a UPS reports battery power (tasks that forbid it do not start)",
	FaultWSUSUnapproved:     "WSUS offers no servicing stack or cumulative update",
	FaultWUBusy:             "the first install fails with 0x80240009 (another operation in progress)",
	FaultWSUS503:            "the first download fails with 0x80244022 (WSUS answered 503)",
	FaultDownloadReset:      "the first download is reset by a proxy (0x80072EFE)",
	FaultSlowServicing:      "the install takes 75s, longer than the tests' nodeTimeout (its task beats)",
	FaultLocalized:          "Windows Update's titles come back in German",
	FaultPendingAfterTarget: "the boot that lands the update leaves CBS RebootPending set",
	FaultAKSHNSReset:        "every boot removes the HNS network; a pod sandbox set up on the node brings it back",
	FaultServiceDeps:        "a third-party service (" + thirdPartyService + ") depends on containerd",
	FaultBadUpdate:          "every install of the update asked for fails with 0x800F0922",
	FaultInstallFailsOnce:   "the first install fails with 0x800F0922; a retry succeeds",
	FaultHNSCollapse:        "--hns-fault-after HNS caught up, its load balancers and endpoints drop to 3 until a reboot",
	FaultHNSRestart:         "--hns-fault-after HNS caught up, HNS restarts and kube-proxy programs it again over a full sync",
	FaultLBDeleted:          "--hns-fault-after HNS caught up, a tenth of its load balancers are deleted and never recreated until a reboot",
	FaultHostEnv:            "the machine environment sets KUBECONFIG to the kubelet's credentials and HTTPS_PROXY to a proxy that refuses",
	FaultNoDSR:              "kube-proxy runs without --enable-dsr (with --kube-proxy-dsr: on this node only)",
	FaultPayloadBlocked:     "a firewall lets the Windows Update service hosts through and drops " + payloadHost,
	FaultProxyAuth:          "the WinHTTP proxy " + fleetProxy + " asks for authentication (407)",
	FaultDownloadCut:        "the first download of each file over HTTP (containerd's archive) is cut mid-body",
	FaultHotpatchReboots:    "a hotpatch's install asks for a reboot after all (with --hotpatch enrolled)",
}

// faultsUsage is --host-faults' help: the form, then a line per fault.
func faultsUsage() string {
	var b strings.Builder
	b.WriteString("faults the hosts play, F,F@node+node,...; without @ on every node:")
	for _, f := range knownFaults {
		fmt.Fprintf(&b, "\n  %-20s %s", f, faultHelp[f])
	}
	return b.String()
}

// knownFaults are the faults --host-faults accepts.
var knownFaults = []Fault{FaultHNSChurn, FaultReadErrors, FaultPendingRenames, FaultOvershoot, FaultUndershoot, FaultRebootUnknown, FaultAgentRestart, FaultSSUFirst, FaultRuntimeCrashloop, FaultContainerdConfigV1, FaultSlowAPI, FaultSourceUnreachable, FaultTaskNotStarted, FaultOnBattery, FaultWSUSUnapproved, FaultWUBusy, FaultWSUS503, FaultDownloadReset, FaultSlowServicing, FaultLocalized, FaultPendingAfterTarget, FaultAKSHNSReset, FaultServiceDeps, FaultBadUpdate, FaultInstallFailsOnce, FaultHNSCollapse, FaultHNSRestart, FaultLBDeleted, FaultHostEnv, FaultNoDSR, FaultPayloadBlocked, FaultProxyAuth, FaultDownloadCut, FaultHotpatchReboots}

// slowServicingTime is how long FaultSlowServicing's install takes.
const slowServicingTime = 75 * time.Second

// How far FaultOvershoot and FaultUndershoot miss the revision asked for.
const (
	overshootBy  = 5
	undershootBy = 1
)

// shape makes node's machine play the faults that live in the host.
func (f Faults) shape(node string, o *fakewin.Options) {
	if f.On(FaultReadErrors, node) {
		o.ReadFails = func(n int) error {
			if n%3 == 2 {
				return errors.New("simulated read-errors: RegOpenKeyEx: Insufficient system resources exist to complete the requested service")
			}
			return nil
		}
	}
	if f.On(FaultPendingRenames, node) {
		o.FileRenames = []string{`\??\C:\ProgramData\Microsoft\Windows Defender\Scans\mpcache.tmp`, ""}
	}
	switch {
	case f.On(FaultUndershoot, node):
		o.Catalogue.Lands = func(t host.Build) host.Build { t.UBR = max(t.UBR-undershootBy, 0); return t }
	case f.On(FaultOvershoot, node):
		o.Catalogue.Lands = func(t host.Build) host.Build { t.UBR += overshootBy; return t }
	}
	if f.On(FaultSourceUnreachable, node) {
		o.Unreachable = "simulated: source-unreachable"
	}
	if f.On(FaultPayloadBlocked, node) {
		o.Firewalled = append(o.Firewalled, payloadHost)
	}
	if f.On(FaultDownloadCut, node) {
		o.CutDownloads = 1
	}
	if f.On(FaultProxyAuth, node) {
		o.WinHTTPProxy = fleetProxy
		o.ProxyAnswer = func(string) int { return 407 }
	}
	if f.On(FaultRuntimeCrashloop, node) {
		o.RuntimeCrashLoops = true
	}
	if f.On(FaultContainerdConfigV1, node) {
		o.ContainerdConfig = containerdConfigV1
	}
	if f.On(FaultSSUFirst, node) {
		o.Catalogue.SSUFirst = true
	}
	if f.On(FaultTaskNotStarted, node) {
		o.TasksNeverRun = true
	}
	if f.On(FaultOnBattery, node) {
		o.OnBattery = true
	}
	if f.On(FaultWSUSUnapproved, node) {
		o.Catalogue.Unapproved = true
	}
	o.Catalogue.Busy = f.On(FaultWUBusy, node)
	o.Catalogue.Unavailable = f.On(FaultWSUS503, node)
	o.Catalogue.DownloadReset = f.On(FaultDownloadReset, node)
	o.Catalogue.HotpatchReboots = f.On(FaultHotpatchReboots, node)
	if f.On(FaultSlowServicing, node) {
		o.Catalogue.InstallTime = slowServicingTime
	}
	if f.On(FaultLocalized, node) {
		o.Catalogue.Localized = true
	}
	if f.On(FaultPendingAfterTarget, node) {
		o.Catalogue.TwoPhase = true
	}
	o.NetworkResetAtBoot = f.On(FaultAKSHNSReset, node)
	if f.On(FaultBadUpdate, node) {
		o.Catalogue.Fails = func(host.Build) uint32 { return badUpdateCode }
	} else if f.On(FaultInstallFailsOnce, node) {
		o.Catalogue.Fails = failsOnce()
	}
	if f.On(FaultServiceDeps, node) {
		o.Services = append(o.Services, fakewin.Service{Name: thirdPartyService, Program: `Program Files\LogAgent\log-agent.exe`, DependsOn: []string{"containerd"}})
	}
}

// failsOnce is FaultInstallFailsOnce's install result: the machine calls it
// under its own lock, once per install.
func failsOnce() func(host.Build) uint32 {
	failed := false
	return func(host.Build) uint32 {
		if failed {
			return 0
		}
		failed = true
		return badUpdateCode
	}
}

// thirdPartyService is FaultServiceDeps' service.
const thirdPartyService = "LogAgent"

// Faults are the faults a fleet plays and on which nodes.
type Faults struct {
	// on maps a fault to the nodes it is limited to; an empty set: every node.
	on map[Fault]map[string]bool
}

// On: the fault is played on node.
func (f Faults) On(fault Fault, node string) bool {
	nodes, ok := f.on[fault]
	return ok && (len(nodes) == 0 || nodes[node])
}

// String is the flag's form, faults in a stable order.
func (f Faults) String() string {
	var parts []string
	for _, k := range knownFaults {
		nodes, ok := f.on[k]
		if !ok {
			continue
		}
		part := string(k)
		if len(nodes) > 0 {
			names := make([]string, 0, len(nodes))
			for n := range nodes {
				names = append(names, n)
			}
			slices.Sort(names)
			part += "@" + strings.Join(names, "+")
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ",")
}

// parseFaults reads --host-faults: F,F,... where each F is a fault's name,
// optionally limited to some nodes as F@node+node. A fault named twice
// plays on the union of its nodes (every node if one use names none).
func parseFaults(s string) (Faults, error) {
	f := Faults{on: map[Fault]map[string]bool{}}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, nodes, limited := strings.Cut(item, "@")
		fault := Fault(name)
		if !slices.Contains(knownFaults, fault) {
			return Faults{}, fmt.Errorf("unknown fault %q (known: %s)", name, joinFaults(knownFaults))
		}
		set, seen := f.on[fault]
		if !limited {
			f.on[fault] = map[string]bool{}
			continue
		}
		if seen && len(set) == 0 {
			continue
		}
		if set == nil {
			set = map[string]bool{}
		}
		for _, n := range strings.Split(nodes, "+") {
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				return Faults{}, fmt.Errorf("%s@%s: %q is not a node name: %s", name, nodes, n, strings.Join(errs, "; "))
			}
			set[n] = true
		}
		f.on[fault] = set
	}
	return f, nil
}

func joinFaults(fs []Fault) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}
