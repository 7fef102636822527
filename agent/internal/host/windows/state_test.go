package windows

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"winpool.dev/agent/internal/host"
)

func TestStateRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "winpool")
	s := stateFile{path: filepath.Join(dir, "state.json")}

	st, err := s.load()
	if err != nil || !st.Same(host.State{}) {
		t.Fatalf("no file yet: %+v, %v; want the zero state", st, err)
	}
	want := host.State{Revision: "r1", Attempts: 2, Reboots: 1, RuntimeUpgrades: 1}
	if err := s.save(host.State{Revision: "r0", Attempts: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.save(want); err != nil {
		t.Fatal(err)
	}
	if st, err = s.load(); err != nil || !st.Same(want) {
		t.Errorf("load = %+v, %v; want %+v", st, err, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("state dir holds %v, want state.json alone", names)
	}
}

func TestCorruptStateIsAnError(t *testing.T) {
	s := stateFile{path: filepath.Join(t.TempDir(), "state.json")}
	if err := os.WriteFile(s.path, []byte(`{"revision": "r1", "attem`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.load(); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("load of a torn file = %v, want a corrupt-state error", err)
	}
}
