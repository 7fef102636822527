package agent

import (
	"strings"
	"sync/atomic"
	"testing"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
)

// The revision's update source travels from the ConfigMap to the host as
// written: the packages, in their order, with their digests.
func TestInstallGetsTheRevisionsPackages(t *testing.T) {
	machine := newMachine(behindHost())
	rev := revisionR1()
	pkgs := []config.Package{
		{Path: `C:\updates\2024-10\ssu.cab`, SHA256: strings.Repeat("a", 64)},
		{URL: "https://updates.example.com/windows10.0-kb5044281-x64.msu", SHA256: strings.Repeat("b", 64)},
	}
	rev.Updates = &config.Updates{Source: config.SourcePackages, Packages: pkgs}
	h := newHarness(t, machine, requestedR1(), revisionConfigMap(rev))
	h.start(h.options())
	eventually(t, "the install asked of the host", func() bool { return len(machine.Updates()) > 0 })
	got := machine.Updates()
	if len(got) != 1 {
		t.Fatalf("%d installs, want 1", len(got))
	}
	want := host.UpdateRequest{Revision: "r1", Target: mustBuild("10.0.20348.2762"), Source: config.SourcePackages, Packages: pkgs}
	if got[0].Revision != want.Revision || got[0].Target != want.Target || got[0].Source != want.Source ||
		len(got[0].Packages) != 2 || got[0].Packages[0] != pkgs[0] || got[0].Packages[1] != pkgs[1] {
		t.Errorf("install request %+v, want %+v", got[0], want)
	}
}

// A revision whose update list breaks the contract fails the node with the
// rule it broke, before anything is installed.
func TestInvalidUpdatesFailTheNode(t *testing.T) {
	machine := newMachine(behindHost())
	rev := revisionR1()
	rev.Updates = &config.Updates{Source: config.SourcePackages, Packages: []config.Package{
		{URL: "https://updates.example.com/kb.msu", SHA256: "ABC"},
	}}
	h := newHarness(t, machine, requestedR1(), revisionConfigMap(rev))
	h.start(h.options())
	n := h.waitStatus(names.StatusFailed)
	if msg := n[keyApplyMessage]; !strings.Contains(msg, "packages[0]") || !strings.Contains(msg, "sha256") {
		t.Errorf("message %q, want the package and the rule", msg)
	}
	if m := machine.Machine(); m.Installs != 0 {
		t.Errorf("%d installs for an invalid revision", m.Installs)
	}
}

// What each attempt's servicing task installed for the start reaches the
// Succeeded report, in order, through the agents that run after each reboot:
// a servicing stack update alone first (its own reboot; the next attempt's
// task replaces its result file), then the cumulative update with the CVE
// IDs Windows Update lists for it.
func TestTheReportRecordsWhatEachAttemptInstalled(t *testing.T) {
	o := behindHost()
	o.Catalogue.SSUFirst = true
	machine := newMachine(o)
	h := newHarness(t, machine, requestedR1(), revisionConfigMap(revisionR1()))
	h.addCSIProxyPod("csi-proxy-r1", "ghcr.io/kubernetes-sigs/sig-windows/csi-proxy:v1.1.3", true)
	h.succeedAcrossReboots(machine, 2)
	got := h.storedReport().Status.Apply.Installed
	if len(got) != 2 || got[0].KB != "KB5050001" || !strings.Contains(got[0].Title, "Servicing Stack Update") || len(got[0].CveIDs) != 0 ||
		got[1].KB != "KB5050002" || !strings.Contains(got[1].Title, "Cumulative Update") || len(got[1].CveIDs) != 3 {
		t.Errorf("the report's installed = %+v, want the servicing stack update, then the cumulative update with its CVE IDs", got)
	}
}

// An install that fails with ERROR_FAIL_REBOOT_REQUIRED (0x80070BC9, as
// Windows Update's result carries it) is not the update's failure: the
// drained node reboots to roll it back, the next attempt installs, and the
// node succeeds.
func TestAnInstallThatFailsUntilARebootRebootsAndInstallsAgain(t *testing.T) {
	o := behindHost()
	var installs atomic.Int32
	o.InstallExitCode = func(host.Build) int {
		if installs.Add(1) == 1 {
			return decide.ExitWUFailRebootRequired
		}
		return exitRebootRequired
	}
	machine := newMachine(o)
	h := newHarness(t, machine, requestedR1(), revisionConfigMap(revisionR1()))
	h.addCSIProxyPod("csi-proxy-r1", "ghcr.io/kubernetes-sigs/sig-windows/csi-proxy:v1.1.3", true)
	h.succeedAcrossReboots(machine, 2)
	if got := len(machine.Updates()); got != 2 || installs.Load() != 2 {
		t.Errorf("%d installs started, %d made; want the failed one and the one after its reboot", got, installs.Load())
	}
}

// succeedAcrossReboots runs an agent until the machine reboots, then a new
// one on the machine booted again (as the node's pod starts again), reboots
// times, and a last one until the start succeeds.
func (h *harness) succeedAcrossReboots(machine *testMachine, reboots int) {
	h.t.Helper()
	for reboot := 1; reboot <= reboots; reboot++ {
		agent := h.start(h.options())
		h.waitReboots(reboot)
		agent.stop(h.t)
		machine.CompleteReboot()
	}
	h.start(h.options())
	h.waitStatus(names.StatusSucceeded)
}
