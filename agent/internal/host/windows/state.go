package windows

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/runtimeswap"
)

// stateFile keeps host.State in one JSON file. A save writes a temporary file
// next to it and renames it over the old one, so a crash or a power cut in
// the middle leaves the old state or the new one, never half of one; losing
// the counters would lift the attempt caps.
type stateFile struct{ path string }

func defaultStateDir(getenv func(string) string) string {
	base := getenv("ProgramData")
	if base == "" {
		base = `C:\ProgramData`
	}
	return filepath.Join(base, "winpool")
}

func (s stateFile) load() (host.State, error) {
	var st host.State
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return host.State{}, fmt.Errorf("%s is corrupt (%v); delete it to start the revision's counters over", s.path, err)
	}
	return st, nil
}

func (s stateFile) save(st host.State) error { return runtimeswap.WriteJSON(s.path, st) }
