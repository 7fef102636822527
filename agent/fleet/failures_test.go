package fleet

import (
	"fmt"
	"testing"

	"winpool.dev/agent/internal/host"
)

var target = host.Build{Major: 10, Build: 20348, UBR: 2762}

func TestFailRateIsSeededAndOrderFree(t *testing.T) {
	f := newFailures(settings(t, "--fail-rate", "0.3", "--seed", "7"))
	again := newFailures(settings(t, "--fail-rate", "0.3", "--seed", "7"))
	other := newFailures(settings(t, "--fail-rate", "0.3", "--seed", "8"))
	failed, differs := 0, 0
	const n = 4000
	for i := n - 1; i >= 0; i-- { // asked in another order than below
		node := fmt.Sprintf("win-%d", i)
		if again.fails(node, target) {
			failed++
		}
	}
	for i := range n {
		node := fmt.Sprintf("win-%d", i)
		if f.fails(node, target) != again.fails(node, target) {
			t.Fatalf("%s: the same seed decided differently", node)
		}
		if f.fails(node, target) != other.fails(node, target) {
			differs++
		}
	}
	if share := float64(failed) / n; share < 0.27 || share > 0.33 {
		t.Errorf("%.3f of the nodes failed, want about 0.3", share)
	}
	if differs == 0 {
		t.Error("another seed fails the same nodes")
	}
}

func TestNamedAndLabelledNodesAlwaysFail(t *testing.T) {
	f := newFailures(settings(t, "--fail-nodes", "win-1"))
	fails := func(node string) bool { return f.failsOn(node)(target) == installFailed }
	if fails("win-0") || !fails("win-1") {
		t.Errorf("win-0 fails %v, win-1 fails %v", fails("win-0"), fails("win-1"))
	}
	f.setLabelled("win-0", true)
	if !fails("win-0") {
		t.Error("a node labelled winpool.dev/sim-fail=true installed its update")
	}
	f.setLabelled("win-0", false)
	if fails("win-0") {
		t.Error("a node whose label was removed still fails")
	}
}
