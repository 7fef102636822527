package decide

import (
	"fmt"
	"strings"

	"winpool.dev/agent/internal/host"
)

// The pool's spec.runtime.upgrade values.
const (
	RuntimeInPlace    = "InPlace"
	RuntimeVerifyOnly = "VerifyOnly"
)

// ImageOwnsRuntime says why containerd must not be replaced on this host,
// "" when it may be. The operator never starts such a node for a runtime
// change (src/rollout/runtime.rs, the same rule); this is the agent's own
// check, for a node started anyway (an older operator, a hand-edited Node):
// a vendor build or a containerd under a service wrapper belongs to the node
// image, which a managed service rebuilds and its next image undoes; a
// containerd another service starts as its child (RKE2) belongs to that
// service even when the pool says InPlace.
func ImageOwnsRuntime(mode string, obs host.Observed) string {
	switch {
	case obs.RuntimeService.Wrapper == host.WrapperParent:
		// Whatever the pool says: its parent puts its own containerd back.
		return fmt.Sprintf("containerd runs as a child of the %s service, which puts its own containerd back at its next start: upgrade %s to change it",
			obs.RuntimeService.Name, strings.ToUpper(obs.RuntimeService.Name))
	case mode == RuntimeInPlace:
		return ""
	case mode == RuntimeVerifyOnly:
		return "the pool's runtime.upgrade is VerifyOnly"
	case vendorBuild(obs.ContainerdVersion):
		return fmt.Sprintf("%s is a vendor build, which the node image owns", obs.ContainerdVersion)
	case obs.RuntimeService.Wrapper != host.WrapperNone:
		return fmt.Sprintf("its service runs under a service wrapper (%s), which the node image owns", obs.RuntimeService.Describe())
	}
	return ""
}

// runtimeRemedy is what the pool's owner can do about a refusal.
func runtimeRemedy(obs host.Observed) string {
	if obs.RuntimeService.Wrapper == host.WrapperParent {
		return "set the pool's runtime.version to the version it runs"
	}
	return "set the pool's runtime.upgrade: InPlace to replace it"
}

// vendorBuild: build metadata ("1.7.20+azure") or a pre-release that is not
// an alpha, beta or release candidate ("1.7.20-eks.1").
func vendorBuild(v string) bool {
	core, _, build := strings.Cut(strings.TrimPrefix(v, "v"), "+")
	if build {
		return true
	}
	_, pre, ok := strings.Cut(core, "-")
	return ok && !strings.HasPrefix(pre, "alpha") && !strings.HasPrefix(pre, "beta") && !strings.HasPrefix(pre, "rc")
}
