package decide

import (
	"testing"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
)

func TestAmbiguousNetworkFailsWithoutWaiting(t *testing.T) {
	in := patched()
	in.Observed.CNIMode, in.Observed.CNIProblem = "", `several HNS networks could be kube-proxy's: "a" (Overlay), "b" (L2Bridge); set KUBE_NETWORK`
	check(t, Next(in), want{action: Report, status: names.StatusFailed, state: host.State{Revision: "r1"},
		message: []string{"cannot tell kube-proxy's HNS network", "set KUBE_NETWORK"}})
}
