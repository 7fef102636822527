package windows

import (
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
