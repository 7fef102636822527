package decide

import (
	"testing"
	"time"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
)

func TestAmbiguousNetworkFailsWithoutWaiting(t *testing.T) {
	in := patched()
	in.Observed.CNIMode, in.Observed.CNIProblem = "", `several HNS networks could be kube-proxy's: "a" (Overlay), "b" (L2Bridge); set KUBE_NETWORK`
	check(t, Next(in), want{action: Report, status: names.StatusFailed, state: host.State{Revision: "r1"},
		message: []string{"cannot tell kube-proxy's HNS network", "set KUBE_NETWORK"}})
}

func TestUnreadableHNSIsWaitedOutThenFails(t *testing.T) {
	in := patched()
	in.Observed.CNIMode, in.Observed.CNIReadError = "", "listing HNS networks: the service has not been started"
	in.NetworkMissingFor = time.Minute
	check(t, Next(in), want{action: Wait, status: names.StatusApplying, state: host.State{Revision: "r1"}})
	in.NetworkMissingFor = DefaultNetworkGrace + time.Second
	check(t, Next(in), want{action: Report, status: names.StatusFailed, state: host.State{Revision: "r1"},
		message: []string{"HNS could not be read", "the service has not been started"}})
}
