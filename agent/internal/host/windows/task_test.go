package windows

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestTaskCommand(t *testing.T) {
	long := `C:\` + strings.Repeat("x", 200)
	for _, tc := range []struct {
		name, exe, subcommand, plan string
		want                        string // "" with err
		err                         string
	}{
		{"the containerd swap", `C:\ProgramData\winpool\runtime\5f1c9a2e01-1\winpool-agent.exe`, ContainerdSwapCommand, `C:\ProgramData\winpool\runtime\5f1c9a2e01-1\plan.json`,
			`"C:\ProgramData\winpool\runtime\5f1c9a2e01-1\winpool-agent.exe" containerd-swap "C:\ProgramData\winpool\runtime\5f1c9a2e01-1\plan.json"`, ""},
		{"servicing", `C:\ProgramData\winpool\servicing\winpool-agent.exe`, ServicingCommand, `C:\ProgramData\winpool\servicing\plan.json`,
			`"C:\ProgramData\winpool\servicing\winpool-agent.exe" servicing "C:\ProgramData\winpool\servicing\plan.json"`, ""},
		{"paths with spaces are quoted", `D:\Program Data\winpool\servicing\winpool-agent.exe`, ServicingCommand, `D:\Program Data\winpool\servicing\plan.json`,
			`"D:\Program Data\winpool\servicing\winpool-agent.exe" servicing "D:\Program Data\winpool\servicing\plan.json"`, ""},
		// 261 characters exactly: 4 quotes, 2 spaces, "servicing" (9) and
		// the paths (127 + 119).
		{"at schtasks' limit", `C:\` + strings.Repeat("a", 120) + `.exe`, ServicingCommand, `C:\` + strings.Repeat("p", 116),
			`"C:\` + strings.Repeat("a", 120) + `.exe" servicing "C:\` + strings.Repeat("p", 116) + `"`, ""},
		{"one over schtasks' limit", `C:\` + strings.Repeat("a", 120) + `.exe`, ServicingCommand, `C:\` + strings.Repeat("p", 117), "", "262 characters, schtasks takes at most 261"},
		{"a long state folder", filepath.Join(long, "winpool-agent.exe"), ContainerdSwapCommand, filepath.Join(long, "plan.json"), "",
			"at most 261: use a shorter state folder than " + long},
	} {
		cmd, err := taskCommand(tc.exe, tc.subcommand, tc.plan)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %q, %v; want an error with %q", tc.name, cmd, err, tc.err)
			}
			continue
		}
		if err != nil || cmd != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, cmd, err, tc.want)
		}
		if len(cmd) > maxTaskRun {
			t.Errorf("%s: %d characters", tc.name, len(cmd))
		}
	}
}
