// Package fake is a simulated Windows host: a machine with a build, a pending
// reboot, containerd, an HNS network and a CSI Proxy, that the agent drives
// exactly like the real one. The simulated fleet owns one per node and plays
// the reboot; unit tests drive it directly.
package fake

import (
	"context"
	"fmt"
	"sync"
	"time"

	"winpool.dev/agent/internal/host"
)

// Servicing exit codes the fake can return (the real ones, see decide).
const (
	ExitSuccess        = 0
	ExitRebootRequired = 3010
	// ExitInstallFailed is a generic servicing failure (0x800F0922).
	ExitInstallFailed = 0x800F0922
)

// Options is the machine at first boot and how it behaves.
type Options struct {
	Build           host.Build
	Containerd      string
	CNIMode         string
	CSIProxyVersion string
	// InstallDuration is how long an update install takes.
	InstallDuration time.Duration
	// InstallExitCode, when set, decides the servicing exit code of an install
	// (default: ExitRebootRequired, with the target build staged for the reboot).
	InstallExitCode func(target host.Build) int
	// OnReboot is called (on its own goroutine) when the agent reboots the
	// host; the fleet stops the agent, plays the reboot and calls
	// CompleteReboot. Nil: the reboot completes at once.
	OnReboot func(reason string)
	// HNS returns what HNS holds now (the fleet's model of kube-proxy).
	HNS func() host.HNSCounts
	// RuntimeUpgrade, when set, decides how a containerd upgrade task ends
	// (default: RuntimeSucceeded, the version installed at once). With
	// RuntimeRunning the task never finishes; with RuntimeRolledBack or
	// RuntimeFailed containerd keeps its version.
	RuntimeUpgrade func(req host.RuntimeRequest) host.RuntimePhase
}

// Host is a simulated machine. Safe for concurrent use.
type Host struct {
	mu            sync.Mutex
	o             Options
	build         host.Build
	staged        *host.Build
	containerd    string
	cni           string
	csi           string
	rebootPending bool
	state         host.State
	installs      int
	reboots       int
	updates       []host.UpdateRequest
	runtimeTask   *host.RuntimeUpgrade
}

var _ host.Host = (*Host)(nil)

func New(o Options) *Host {
	return &Host{o: o, build: o.Build, containerd: o.Containerd, cni: o.CNIMode, csi: o.CSIProxyVersion}
}

func (h *Host) Observe(ctx context.Context) (host.Observed, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	obs := host.Observed{Build: h.build, ContainerdVersion: h.containerd, CNIMode: h.cni, CSIProxyVersion: h.csi, RebootPending: h.rebootPending}
	if h.rebootPending {
		obs.RebootPendingBecause = "CBS RebootPending"
	}
	if h.runtimeTask != nil {
		u := *h.runtimeTask
		obs.RuntimeUpgrade = &u
	}
	return obs, nil
}

func (h *Host) HNS(ctx context.Context) (host.HNSCounts, error) {
	if h.o.HNS == nil {
		return host.HNSCounts{}, nil
	}
	return h.o.HNS(), nil
}

func (h *Host) InstallUpdate(ctx context.Context, req host.UpdateRequest) (host.UpdateResult, error) {
	target := req.Target
	select {
	case <-time.After(h.o.InstallDuration):
	case <-ctx.Done():
		return host.UpdateResult{}, ctx.Err()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.installs++
	h.updates = append(h.updates, req)
	code := ExitRebootRequired
	if h.o.InstallExitCode != nil {
		code = h.o.InstallExitCode(target)
	}
	detail := fmt.Sprintf("simulated cumulative update to %s", target)
	switch code {
	case ExitRebootRequired:
		t := target
		h.staged = &t
		h.rebootPending = true
	case ExitSuccess:
		h.build = target
	}
	return host.UpdateResult{ExitCode: code, Detail: detail}, nil
}

func (h *Host) UpgradeContainerd(ctx context.Context, req host.RuntimeRequest) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	phase := host.RuntimeSucceeded
	if h.o.RuntimeUpgrade != nil {
		phase = h.o.RuntimeUpgrade(req)
	}
	h.runtimeTask = &host.RuntimeUpgrade{Revision: req.Revision, Attempt: req.Attempt, Version: req.Version, Phase: phase, Started: time.Now()}
	switch phase {
	case host.RuntimeSucceeded:
		h.containerd = req.Version
	case host.RuntimeRolledBack, host.RuntimeFailed:
		h.runtimeTask.Message = "simulated: containerd " + req.Version + " did not start"
	}
	return nil
}

func (h *Host) Reboot(ctx context.Context, reason string) error {
	h.mu.Lock()
	h.reboots++
	cb := h.o.OnReboot
	h.mu.Unlock()
	if cb == nil {
		h.CompleteReboot()
		return nil
	}
	go cb(reason)
	return nil
}

// CompleteReboot is the machine coming back: a staged update is now the
// running build, and nothing is pending. Returns the build it booted.
func (h *Host) CompleteReboot() host.Build {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.staged != nil {
		h.build = *h.staged
		h.staged = nil
	}
	h.rebootPending = false
	return h.build
}

func (h *Host) LoadState() (host.State, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state, nil
}

func (h *Host) SaveState(s host.State) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.state = s
	return nil
}

// Machine is what the kubelet of this host would report, for the fleet.
type Machine struct {
	Build      host.Build
	Containerd string
	Installs   int
	Reboots    int
	// Updates are the install requests the host received, in order.
	Updates []host.UpdateRequest
}

func (h *Host) Machine() Machine {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Machine{Build: h.build, Containerd: h.containerd, Installs: h.installs, Reboots: h.reboots,
		Updates: append([]host.UpdateRequest(nil), h.updates...)}
}
