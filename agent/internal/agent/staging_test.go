package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/names"
	"winpool.dev/agent/internal/report"
)

// staging is the report's staging as stored (nil: none).
func (h *harness) staging() *report.Staging {
	r := h.storedReport()
	if r == nil {
		return nil
	}
	return r.Status.Staging
}

func (h *harness) waitStaging(status report.StagingStatus) *report.Staging {
	h.t.Helper()
	eventually(h.t, "staging "+string(status), func() bool { s := h.staging(); return s != nil && s.Status == status })
	return h.staging()
}

// startR1 is the operator's start of the idle node for r1.
func (h *harness) startR1() {
	h.operatorEdit(func(n *corev1.Node) {
		n.Labels[names.LabelRevision] = "r1"
		n.Annotations = map[string]string{names.AnnState: names.StateApplying, names.AnnStartedAt: testStart}
		n.Spec.Unschedulable = true // cordoned by the operator's start
	})
}

// startStaging runs an agent that stages (transientRetry: its wait after a
// first failure, 0 the agent's) on machine, for an idle node of r1's pool.
func startStaging(t *testing.T, machine *testMachine, transientRetry time.Duration) *harness {
	h := newHarness(t, machine, idleNode(), targetConfigMap(revisionR1()))
	o := h.options()
	o.Stage, o.TransientRetryAfter = true, transientRetry
	h.start(o)
	return h
}

func stagingMachine() *testMachine {
	o := behindHost()
	o.Catalogue.DownloadTime = 100 * time.Millisecond
	return newMachine(o)
}

// The cumulative update is downloaded, at background priority, while the
// node still serves, and reported Staged naming the KB and its size; the
// install after the operator's start downloads nothing more.
func TestAStagedUpdateIsDownloadedBeforeTheStart(t *testing.T) {
	machine := stagingMachine()
	h := startStaging(t, machine, 0)
	s := h.waitStaging(report.StagingStaged)
	if s.Revision != "r1" || len(s.Items) != 1 || !strings.HasPrefix(s.Items[0].Name, "KB5050002: ") || s.Items[0].Bytes != 1200<<20 {
		t.Errorf("staged %+v, want r1's KB5050002 of 1200 MiB", s)
	}
	if m := machine.Machine(); m.UpdateDownloads != 1 || m.BackgroundDownloads != 1 || m.Installs != 0 || m.Reboots != 0 {
		t.Errorf("before the start: %d downloads (%d in the background), %d installs, %d reboots; want the one download alone",
			m.UpdateDownloads, m.BackgroundDownloads, m.Installs, m.Reboots)
	}
	h.startR1()
	h.waitReboots(1)
	if m := machine.Machine(); m.UpdateDownloads != 1 || m.Installs != 1 {
		t.Errorf("after the install: %d downloads, %d installs; want the staged copy installed, not downloaded again", m.UpdateDownloads, m.Installs)
	}
	h.assertOnlyAgentWrites()
}

// A staged copy that vanished before the start (a disk cleanup) is
// downloaded again by the install, at normal priority.
func TestAStagedCopyThatVanishedIsDownloadedAgain(t *testing.T) {
	machine := stagingMachine()
	h := startStaging(t, machine, 0)
	h.waitStaging(report.StagingStaged)
	machine.m.ClearDownloads()
	h.startR1()
	h.waitReboots(1)
	if m := machine.Machine(); m.UpdateDownloads != 2 || m.BackgroundDownloads != 1 {
		t.Errorf("%d downloads, %d in the background; want the install's own download after the staged one", m.UpdateDownloads, m.BackgroundDownloads)
	}
}

// A pool that does not stage (WINPOOL_STAGING=Disabled): the install
// downloads the update, at normal priority, and the report carries no
// staging.
func TestWithoutStagingTheInstallDownloads(t *testing.T) {
	machine := stagingMachine()
	h := newHarness(t, machine, idleNode(), targetConfigMap(revisionR1()))
	h.start(h.options())
	eventually(t, "a preflight", func() bool { return h.value(keyPreflightRevision) == "r1" })
	h.startR1()
	h.waitReboots(1)
	if s := h.staging(); s != nil {
		t.Errorf("staging %+v reported by an agent that does not stage", s)
	}
	if m := machine.Machine(); m.UpdateDownloads != 1 || m.BackgroundDownloads != 0 {
		t.Errorf("%d downloads, %d in the background; want the install's own", m.UpdateDownloads, m.BackgroundDownloads)
	}
}

// A download the source refuses (WSUS's 503) fails the staging, naming the
// KB, the HRESULT and the log; it is tried again after the transient wait
// and then Staged.
func TestAFailedStagingSaysWhyAndIsTriedAgain(t *testing.T) {
	o := behindHost()
	o.Catalogue.Unavailable = true
	machine := newMachine(o)
	h := startStaging(t, machine, 300*time.Millisecond)
	failed := h.waitStaging(report.StagingFailed)
	for _, want := range []string{"KB5050002", "0x80244022", decide.WindowsUpdateLog} {
		if !strings.Contains(failed.Message, want) {
			t.Errorf("staging failed with %q, which does not say %q", failed.Message, want)
		}
	}
	h.waitStaging(report.StagingStaged)
	if m := machine.Machine(); m.UpdateDownloads != 2 || m.Installs != 0 {
		t.Errorf("%d downloads, %d installs; want the failed download and the one after it, nothing installed", m.UpdateDownloads, m.Installs)
	}
}

func TestParseStagingTakesEnabledDisabledOrNothing(t *testing.T) {
	for v, want := range map[string]bool{"": true, "Enabled": true, "Disabled": false} {
		if got, err := ParseStaging(v); err != nil || got != want {
			t.Errorf("ParseStaging(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	if _, err := ParseStaging("false"); err == nil || !strings.Contains(err.Error(), StagingEnv) {
		t.Errorf("ParseStaging(false) = %v, want an error naming %s", err, StagingEnv)
	}
	for v, want := range map[string]int64{"": DefaultStagingBandwidth, "1048576": 1 << 20} {
		if got, err := ParseStagingBandwidth(v); err != nil || got != want {
			t.Errorf("ParseStagingBandwidth(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"0", "-1", "20Mi", "fast"} {
		if _, err := ParseStagingBandwidth(v); err == nil || !strings.Contains(err.Error(), StagingBandwidthEnv) {
			t.Errorf("ParseStagingBandwidth(%q) = %v, want an error naming %s", v, err, StagingBandwidthEnv)
		}
	}
}

// A restarted agent takes the Staged revision from its report: nothing is
// searched or downloaded again, and no write says Staging in between.
func TestAStagedRevisionOutlivesTheAgentsRestart(t *testing.T) {
	machine := stagingMachine()
	h := newHarness(t, machine, idleNode(), targetConfigMap(revisionR1()))
	h.seedReportSpec(report.Status{AgentVersion: testVersion, Staging: &report.Staging{Revision: "r1", Status: report.StagingStaged,
		Items: []report.StagedItem{{Name: "KB5050002: 2026-12 Cumulative Update", Bytes: 1200 << 20}}}})
	o := h.options()
	o.Stage = true
	h.start(o)
	eventually(t, "a preflight", func() bool { return h.value(keyPreflightRevision) == "r1" })
	for _, w := range h.reportWrites() {
		if w.Staging != nil && w.Staging.Status != report.StagingStaged {
			t.Errorf("a write of staging %+v after the restart", w.Staging)
		}
	}
	if s := h.staging(); s == nil || s.Status != report.StagingStaged || len(s.Items) != 1 {
		t.Errorf("staging %+v, want the Staged revision kept", s)
	}
	if m := machine.Machine(); m.UpdateDownloads != 0 {
		t.Errorf("%d downloads after the restart, want none", m.UpdateDownloads)
	}
}

// The end of a download is reported when it ends, not at the agent's next
// recheck (an hour here): a pool waits for every node's Staged.
func TestTheEndOfADownloadIsReportedWhenItEnds(t *testing.T) {
	h := newHarness(t, stagingMachine(), idleNode(), targetConfigMap(revisionR1()))
	o := h.options()
	o.Stage = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, o, tuning{retryInitial: 2 * time.Millisecond, retryMax: 20 * time.Millisecond, recheck: time.Hour})
	}()
	t.Cleanup(func() { cancel(); <-done })
	h.waitStaging(report.StagingStaged)
}
