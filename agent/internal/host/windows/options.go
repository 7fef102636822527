// Package windows is the real host: a Windows Server node, read through the
// registry and changed through servicing, services and a reboot. The logic
// runs on any Machine (machine.go), so it is tested on Linux and runs the
// simulated fleet over a fake one; the real Machine builds on Windows only,
// and elsewhere New says so.
package windows

import "time"

// Options locate what the host keeps and runs; zero values are the
// defaults of a Windows node.
type Options struct {
	// StateDir holds state.json; "" means %ProgramData%\winpool.
	StateDir string
	// Containerd is the containerd binary; "" is the program of the
	// containerd service, then %ProgramFiles%\containerd\containerd.exe
	// (never PATH: containerdProgram).
	Containerd string
	// KubeNetwork is the name of kube-proxy's HNS network (kube-proxy's
	// --network-name or KUBE_NETWORK); "" recognizes it (hns.Select).
	KubeNetwork string
	// ContainerdReleases is where official containerd releases are
	// downloaded from; "" is GitHub's (stage.ContainerdReleases).
	ContainerdReleases string
	// SwapProof is how long a new containerd is given to come up and to
	// keep answering (zero: runtimeswap's defaults); the simulated fleet
	// shortens it.
	SwapProof SwapProof
}

// SwapProof is runtimeswap.Plan's proof times.
type SwapProof struct{ StartWithin, SettleFor, CheckEvery time.Duration }
