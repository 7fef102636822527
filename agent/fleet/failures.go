package fleet

import (
	"encoding/binary"
	"hash/fnv"
	"sync"

	"winpool.dev/agent/internal/host"
)

// failures decides which update installs fail (servicing exit 0x800F0922):
// on the nodes named by --fail-nodes, on nodes labelled
// winpool.dev/sim-fail=true, and on a --fail-rate share of the others.
//
// The draw is a hash of (seed, node, target build), not a shared random
// stream: the same seed fails the same nodes whatever order thousands of
// concurrent installs happen in, and a node's retries of one update fail
// alike, as a bad update does.
type failures struct {
	rate  float64
	seed  uint64
	nodes map[string]bool

	mu       sync.RWMutex
	labelled map[string]bool
}

func newFailures(s *Settings) *failures {
	return &failures{rate: s.FailRate, seed: s.Seed, nodes: s.FailNodes, labelled: map[string]bool{}}
}

// setLabelled records whether a node carries winpool.dev/sim-fail=true (from
// the fleet's node informer; the machine asks under its own lock, so the answer
// must not need the API).
func (f *failures) setLabelled(node string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		f.labelled[node] = true
	} else {
		delete(f.labelled, node)
	}
}

func (f *failures) fails(node string, target host.Build) bool {
	f.mu.RLock()
	labelled := f.labelled[node]
	f.mu.RUnlock()
	return labelled || f.nodes[node] || f.draw(node, target) < f.rate
}

// draw is uniform in [0, 1) for each (seed, node, target).
func (f *failures) draw(node string, target host.Build) float64 {
	h := fnv.New64a()
	var seed [8]byte
	binary.LittleEndian.PutUint64(seed[:], f.seed)
	h.Write(seed[:])
	h.Write([]byte(node))
	h.Write([]byte{0})
	h.Write([]byte(target.String()))
	return float64(h.Sum64()>>11) / (1 << 53)
}

// installFailed is CBS_E_INSTALLERS_FAILED, what a failing install ends with.
const installFailed = 0x800F0922

// failsOn is the machine's catalogue's say on node: the HRESULT the install
// of an update to target fails with (0: it installs).
func (f *failures) failsOn(node string) func(host.Build) uint32 {
	return func(target host.Build) uint32 {
		if f.fails(node, target) {
			return installFailed
		}
		return 0
	}
}
