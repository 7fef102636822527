package fleet

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/host/fakewin"
)

// Fault is one way a simulated host is less kind than the default fake
// (--host-faults): each models a behaviour of real Windows nodes, so the
// agent and the operator can be seen failing on it before it is fixed, and
// the suite keeps them fixed. What each plays is its line in faults.
type Fault string

const (
	FaultHNSChurn           Fault = "hns-churn"
	FaultReadErrors         Fault = "read-errors"
	FaultPendingRenames     Fault = "pending-renames"
	FaultOvershoot          Fault = "overshoot"
	FaultUndershoot         Fault = "undershoot"
	FaultRebootUnknown      Fault = "reboot-unknown"
	FaultAgentRestart       Fault = "agent-restart"
	FaultSSUFirst           Fault = "ssu-first"
	FaultRuntimeCrashloop   Fault = "runtime-crashloop"
	FaultContainerdConfigV1 Fault = "containerd-config-v1"
	FaultSlowAPI            Fault = "slow-api"
	FaultSourceUnreachable  Fault = "source-unreachable"
	FaultTaskNotStarted     Fault = "task-not-started"
	FaultOnBattery          Fault = "on-battery"
	FaultWSUSUnapproved     Fault = "wsus-unapproved"
	FaultWUBusy             Fault = "wu-busy"
	FaultWSUS503            Fault = "wsus-503"
	FaultWUAException       Fault = "wua-exception"
	FaultAUScheduled        Fault = "au-scheduled"
	FaultWUDisabled         Fault = "wu-disabled"
	FaultDownloadReset      Fault = "download-reset"
	FaultSlowServicing      Fault = "slow-servicing"
	FaultLocalized          Fault = "localized"
	FaultPendingAfterTarget Fault = "pending-after-target"
	FaultAKSHNSReset        Fault = "aks-hns-reset"
	FaultServiceDeps        Fault = "service-deps"
	FaultBadUpdate          Fault = "bad-update"
	FaultInstallFailsOnce   Fault = "install-fails-once"
	FaultInstallFailsReboot Fault = "install-fails-reboot"
	FaultHostEnv            Fault = "host-env"
	FaultNoDSR              Fault = "no-dsr"
	FaultPayloadBlocked     Fault = "payload-blocked"
	FaultProxyAuth          Fault = "proxy-auth"
	FaultDownloadCut        Fault = "download-cut"
	FaultHotpatchReboots    Fault = "hotpatch-reboots"
	FaultDotNetOnly         Fault = "dotnet-only"
	FaultKubeletStaleKernel Fault = "kubelet-stale-kernel"
)

// faults is every fault --host-faults accepts, with what the host does: the
// one list the flag's help, its unknown-fault error and the order of
// Faults.String come from, and the second column of docs/agent.md's fault
// table (TestTheAgentDocsTableEveryFault; backquotes aside). No backquote
// here: the flag package reads one in a usage line as its value's name.
var faults = []struct {
	Fault
	does string
}{
	{FaultHNSChurn, "the HNS counts move on every read (read every 50 ms)"},
	{FaultReadErrors, "one read of the host in three fails for a moment"},
	{FaultPendingRenames, "a PendingFileRenameOperations entry put back at every boot (Defender, an installer's leftovers)"},
	{FaultOvershoot, "an update lands 5 revisions past the one asked for (the source offered a newer cumulative update)"},
	{FaultUndershoot, "an update lands one revision short, every time (the source only has an older one)"},
	{FaultRebootUnknown, "a reboot shows as Ready=Unknown (the kubelet went down before it could post NotReady), not False"},
	{FaultAgentRestart, "the agent's pod restarts in the middle of every install"},
	{FaultSSUFirst, "the first install brings only a servicing stack update, which needs its own reboot"},
	{FaultRuntimeCrashloop, "a new containerd answers, then crash-loops while its service says Running"},
	{FaultContainerdConfigV1, "containerd's config.toml is a version 1 file (no version, short plugin names)"},
	{FaultSlowAPI, "the kubernetes Service's ClusterIP does not answer for 10 minutes after each boot (kube-proxy has not programmed its HNS load balancer)"},
	{FaultSourceUnreachable, "no update source answers (dial and search fail)"},
	{FaultTaskNotStarted, "Task Scheduler accepts each run of the agent's tasks and their program never starts (antivirus, App Control)"},
	{FaultOnBattery, "a UPS reports battery power: Task Scheduler starts no task whose conditions forbid it (the schema's default)"},
	{FaultWSUSUnapproved, "the source offers no servicing stack or cumulative update (WSUS has not approved the month's for the node's group)"},
	{FaultWUBusy, "at the first install Automatic Updates is installing something: IUpdateInstaller.IsBusy says so, an Install throws 0x80240009 (WU_E_OPERATIONINPROGRESS)"},
	{FaultWSUS503, "the first download fails with 0x80244022 (WSUS answered 503)"},
	{FaultWUAException, "the install's first search throws 0x8024401C (WSUS timed out), its first install 0x80240016 (WU_E_INSTALL_NOT_ALLOWED), each as COM throws: 0x80020009 with the code in EXCEPINFO"},
	{FaultAUScheduled, "a WSUS Group Policy's Configure Automatic Updates: 4, download and install every day at 03:00 (AU NoAutoUpdate 0, AUOptions 4, ScheduledInstallDay 0, ScheduledInstallTime 3)"},
	{FaultWUDisabled, "the Windows Update service is disabled and its policies off, as GitHub's runner images set them (wuauserv Start 4; AU NoAutoUpdate 1, AUOptions 1; DisableWindowsUpdateAccess 1, DoNotConnectToWindowsUpdateInternetLocations 1)"},
	{FaultDownloadReset, "the first download is reset by a proxy (0x80072EFE)"},
	{FaultSlowServicing, "the install takes 75 s, longer than the pool's nodeTimeout in the tests (60 s)"},
	{FaultLocalized, "Windows Update's titles come back in German"},
	{FaultPendingAfterTarget, "the boot that lands the update leaves CBS RebootPending set (a two-phase update)"},
	{FaultAKSHNSReset, "every boot removes kube-proxy's HNS network (AKS's boot-time clean-up); Azure CNI creates it again only when a pod sandbox is set up on the node"},
	{FaultServiceDeps, "a vendor's service (" + thirdPartyService + ") depends on containerd (DependOnService): the SCM refuses to stop containerd while it runs"},
	{FaultBadUpdate, "every install of the update asked for fails with 0x800F0922 (CBS_E_INSTALLERS_FAILED: a bad month, on every node it reaches)"},
	{FaultInstallFailsOnce, "the first install of an update fails with 0x800F0922 and every later one succeeds (a component store repaired, a full disk cleaned)"},
	{FaultInstallFailsReboot, "the first install of an update fails with 0x80070BC9 (ERROR_FAIL_REBOOT_REQUIRED) and leaves a reboot pending to roll it back; the install after it succeeds"},
	{FaultHNSCollapse, "--hns-fault-after HNS caught up, its load balancers and remote endpoints drop to 3 until a reboot (kubernetes/kubernetes#110849)"},
	{FaultHNSRestart, "--hns-fault-after HNS caught up, HNS restarts: everything is deleted and kube-proxy programs it again over a full sync"},
	{FaultLBDeleted, "--hns-fault-after HNS caught up, a tenth of its load balancers are deleted out of band and never recreated until a reboot (kubernetes/kubernetes#135802)"},
	{FaultHostEnv, "the machine's environment (a HostProcess container inherits it) sets KUBECONFIG to the kubelet's credentials, as the EKS AMI does machine-wide, and HTTPS_PROXY/HTTP_PROXY to a proxy that refuses"},
	{FaultNoDSR, "kube-proxy runs without --enable-dsr while the fleet's others run with it (--kube-proxy-dsr): none of its HNS load balancers has Direct Server Return"},
	{FaultPayloadBlocked, "a firewall lets the Windows Update service hosts through and drops " + payloadHost},
	{FaultProxyAuth, "the machine's WinHTTP proxy (" + fleetProxy + ") asks for authentication (407)"},
	{FaultDownloadCut, "the first download of each file over HTTP (containerd's release archive) is cut mid-body, as a proxy resetting a long transfer"},
	{FaultHotpatchReboots, "with --hotpatch enrolled: a hotpatch's install asks for a reboot after all"},
	{FaultKubeletStaleKernel, "the kubelet reads the build once per boot, as the Windows kubelet's stats client does when it starts: after a reboot-free install its kernelVersion keeps the build before it"},
	{FaultDotNetOnly, "the source offers only the month's .NET Framework cumulative update (the OS's classification, a title of its own), not the OS's"},
}

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

// faultsUsage is --host-faults' help: the form, then a line per fault.
func faultsUsage() string {
	var b strings.Builder
	b.WriteString("faults the hosts play, F,F@node+node,...; without @ on every node:")
	for _, f := range faults {
		fmt.Fprintf(&b, "\n  %-20s %s", f.Fault, f.does)
	}
	return b.String()
}

// known: the fault is one --host-faults accepts.
func known(fault Fault) bool {
	for _, f := range faults {
		if f.Fault == fault {
			return true
		}
	}
	return false
}

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
	if f.On(FaultAUScheduled, node) {
		o.Registry = append(o.Registry, auScheduled...)
	}
	if f.On(FaultWUDisabled, node) {
		o.Registry = append(o.Registry, wuDisabled...)
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
	o.Catalogue.Throws = f.On(FaultWUAException, node)
	o.Catalogue.DownloadReset = f.On(FaultDownloadReset, node)
	o.Catalogue.HotpatchReboots = f.On(FaultHotpatchReboots, node)
	o.Catalogue.DotNetOnly = f.On(FaultDotNetOnly, node)
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
	// A fault's failures replace --fail-nodes' and --fail-rate's; without one those stand.
	if fails := f.installFails(node); fails != nil {
		o.Catalogue.Fails = fails
	}
	if f.On(FaultServiceDeps, node) {
		o.Services = append(o.Services, fakewin.Service{Name: thirdPartyService, Program: `Program Files\LogAgent\log-agent.exe`, DependsOn: []string{"containerd"}})
	}
}

// auScheduled is what FaultAUScheduled's policy writes: Configure
// Automatic Updates enabled, option 4, every day (0) at 03:00, the
// policy's default schedule.
var auScheduled = []fakewin.Value{
	{Key: auPolicyKey, Name: "NoAutoUpdate", DWORD: 0},
	{Key: auPolicyKey, Name: "AUOptions", DWORD: 4},
	{Key: auPolicyKey, Name: "ScheduledInstallDay", DWORD: 0},
	{Key: auPolicyKey, Name: "ScheduledInstallTime", DWORD: 3},
}

// wuDisabled is what FaultWUDisabled's image writes
// (actions/runner-images, images/windows/scripts/build/Configure-System.ps1).
var wuDisabled = []fakewin.Value{
	{Key: auPolicyKey, Name: "AUOptions", DWORD: 1},
	{Key: auPolicyKey, Name: "NoAutoUpdate", DWORD: 1},
	{Key: wuPolicyKey, Name: "DoNotConnectToWindowsUpdateInternetLocations", DWORD: 1},
	{Key: wuPolicyKey, Name: "DisableWindowsUpdateAccess", DWORD: 1},
	{Key: fakewin.WUServiceKey, Name: "Start", DWORD: 4},
}

const (
	wuPolicyKey = `SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate`
	auPolicyKey = wuPolicyKey + `\AU`
)

// installFails is how node's installs fail (nil: they do not).
func (f Faults) installFails(node string) func(host.Build) uint32 {
	switch {
	case f.On(FaultBadUpdate, node):
		return func(host.Build) uint32 { return badUpdateCode }
	case f.On(FaultInstallFailsOnce, node):
		return failsOnce(badUpdateCode)
	case f.On(FaultInstallFailsReboot, node):
		return failsOnce(decide.ExitWUFailRebootRequired)
	}
	return nil
}

// failsOnce is an install result that is code the first time
// (FaultInstallFailsOnce, FaultInstallFailsReboot): the machine calls it
// under its own lock, once per install.
func failsOnce(code uint32) func(host.Build) uint32 {
	failed := false
	return func(host.Build) uint32 {
		if failed {
			return 0
		}
		failed = true
		return code
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
	for _, k := range faults {
		nodes, ok := f.on[k.Fault]
		if !ok {
			continue
		}
		part := string(k.Fault)
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
		if !known(fault) {
			return Faults{}, fmt.Errorf("unknown fault %q (known: %s)", name, knownNames())
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

// knownNames is the faults' names, as the unknown-fault error lists them.
func knownNames() string {
	s := make([]string, len(faults))
	for i, f := range faults {
		s[i] = string(f.Fault)
	}
	return strings.Join(s, ", ")
}
