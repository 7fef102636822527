package windows

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTaskCommand(t *testing.T) {
	cmd, err := taskCommand(`C:\ProgramData\winpool\runtime\5f1c9a2e01-1\winpool-agent.exe`, `C:\ProgramData\winpool\runtime\5f1c9a2e01-1\plan.json`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"C:\ProgramData\winpool\runtime\5f1c9a2e01-1\winpool-agent.exe" containerd-swap "C:\ProgramData\winpool\runtime\5f1c9a2e01-1\plan.json"`; cmd != want {
		t.Errorf("command %s, want %s", cmd, want)
	}
	long := `C:\` + strings.Repeat("x", 200)
	if _, err := taskCommand(long+`\winpool-agent.exe`, long+`\plan.json`); err == nil || !strings.Contains(err.Error(), "at most 261") {
		t.Errorf("a command over schtasks' limit: %v, want an error naming the limit", err)
	}
}

func TestRemoveOtherRevisions(t *testing.T) {
	dir := t.TempDir()
	for _, rev := range []string{"r0", "r1", "r2"} {
		os.MkdirAll(filepath.Join(dir, rev, "01"), 0o700)
		os.WriteFile(filepath.Join(dir, rev, "01", "kb.msu"), []byte("x"), 0o600)
	}
	if err := removeOtherRevisions(dir, "r1"); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "r1" {
		t.Errorf("left %v, want r1 alone", entries)
	}
	if err := removeOtherRevisions(filepath.Join(dir, "none"), "r1"); err != nil {
		t.Errorf("no folder yet: %v", err)
	}
}
