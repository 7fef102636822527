package host_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The simulated fleet and the loop's tests run the agent's real Windows
// host over a simulated machine; a host that plays servicing or preflight
// at the level of behaviour would let the code a node runs go untested
// again. This keeps it so: the fleet links the real host and the simulated
// machine, and nothing but windows.Host implements host.Host's servicing.
func TestTheFleetRunsTheRealWindowsHost(t *testing.T) {
	// The fleet is a module of its own (agent/fleet), beside the agent's.
	list := exec.Command("go", "list", "-deps", "./cmd/winpool-fleet")
	list.Dir = filepath.Join("..", "..", "fleet")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, want := range []string{"winpool.dev/agent/internal/host/windows", "winpool.dev/agent/internal/host/fakewin"} {
		if !contains(deps, want) {
			t.Errorf("the fleet does not link %s", want)
		}
	}
	if contains(deps, "winpool.dev/agent/internal/host/fake") {
		t.Error("the fleet links a behaviour-level host (internal/host/fake)")
	}
}

var startUpdate = regexp.MustCompile(`(?m)^func \([^)]*\) (StartUpdate|Preflight|UpgradeContainerd)\(ctx context\.Context, req host\.(UpdateRequest|RuntimeRequest)\)`)

func TestOnlyTheWindowsHostImplementsServicing(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if startUpdate.Match(b) && filepath.Dir(p) != filepath.Join(root, "internal", "host", "windows") {
			t.Errorf("%s implements the host's servicing; the only implementation is windows.Host, over a Machine", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
