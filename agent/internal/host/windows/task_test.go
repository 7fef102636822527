package windows

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"
)

// registered is a task definition as Task Scheduler reads it (its own
// reading of the schema, not taskXML's), with the schema's defaults for
// what is left out.
type registered struct {
	UserID   string `xml:"Principals>Principal>UserId"`
	RunLevel string `xml:"Principals>Principal>RunLevel"`
	Settings struct {
		MultipleInstancesPolicy    string
		DisallowStartIfOnBatteries *bool
		StopIfGoingOnBatteries     *bool
		ExecutionTimeLimit         string
		Priority                   *int
	}
	Command   string `xml:"Actions>Exec>Command"`
	Arguments string `xml:"Actions>Exec>Arguments"`
}

func readDefinition(t *testing.T, definition string) registered {
	t.Helper()
	var r registered
	d := xml.NewDecoder(strings.NewReader(definition))
	// The declaration says UTF-16 (a BSTR's encoding); the string itself
	// is Go's.
	d.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	if err := d.Decode(&r); err != nil {
		t.Fatalf("the definition does not parse: %v\n%s", err, definition)
	}
	return r
}

// execOf is the command line a definition runs.
func execOf(t *testing.T, definition string) string {
	r := readDefinition(t, definition)
	return `"` + r.Command + `" ` + r.Arguments
}

func TestTaskDefinition(t *testing.T) {
	long := `C:\` + strings.Repeat("x", 300)
	for _, tc := range []struct {
		name, exe, subcommand, plan string
		agentCap                    time.Duration
		limit                       string
	}{
		{"the containerd swap", `C:\ProgramData\winpool\runtime\5f1c9a2e01-1\winpool-agent.exe`, ContainerdSwapCommand, `C:\ProgramData\winpool\runtime\5f1c9a2e01-1\plan.json`, 0, "PT30M"},
		{"servicing", `C:\ProgramData\winpool\servicing\winpool-agent.exe`, ServicingCommand, `C:\ProgramData\winpool\servicing\plan.json`, 0, "PT6H"},
		// A pool's timeouts.install of 4h: Task Scheduler ends the task at twice that.
		{"servicing under a pool's budget", `C:\ProgramData\winpool\servicing\winpool-agent.exe`, ServicingCommand, `C:\ProgramData\winpool\servicing\plan.json`, 4 * time.Hour, "PT8H"},
		// PT0M would be no limit at all.
		{"a budget of seconds", `C:\ProgramData\winpool\servicing\winpool-agent.exe`, ServicingCommand, `C:\ProgramData\winpool\servicing\plan.json`, 20 * time.Second, "PT2M"},
		{"paths with spaces and markup", `D:\Program Data & Co\<winpool>\winpool-agent.exe`, ServicingCommand, `D:\Program Data & Co\<winpool>\plan.json`, 0, "PT6H"},
		// schtasks /TR took 261 characters; an Exec action has no such limit.
		{"a long state folder", long + `\winpool-agent.exe`, ContainerdSwapCommand, long + `\plan.json`, 0, "PT30M"},
	} {
		def, err := taskDefinition(tc.exe, tc.subcommand, tc.plan, tc.agentCap)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !strings.HasPrefix(def, `<?xml version="1.0" encoding="UTF-16"?>`) || !strings.Contains(def, `xmlns="`+taskNamespace+`"`) {
			t.Errorf("%s: not a Task Scheduler document:\n%s", tc.name, def)
		}
		r := readDefinition(t, def)
		s := r.Settings
		if r.Command != tc.exe || r.Arguments != tc.subcommand+` "`+tc.plan+`"` {
			t.Errorf("%s: runs %q %q", tc.name, r.Command, r.Arguments)
		}
		if r.UserID != "S-1-5-18" || r.RunLevel != "HighestAvailable" {
			t.Errorf("%s: runs as %q at %q, want SYSTEM at HighestAvailable", tc.name, r.UserID, r.RunLevel)
		}
		// Left out, both battery conditions default to true.
		if s.DisallowStartIfOnBatteries == nil || *s.DisallowStartIfOnBatteries || s.StopIfGoingOnBatteries == nil || *s.StopIfGoingOnBatteries {
			t.Errorf("%s: battery conditions %v, %v; want both set to false", tc.name, s.DisallowStartIfOnBatteries, s.StopIfGoingOnBatteries)
		}
		if s.ExecutionTimeLimit != tc.limit || s.Priority == nil || *s.Priority != 4 || s.MultipleInstancesPolicy != "IgnoreNew" {
			t.Errorf("%s: limit %q, priority %v, instances %q; want %s, 4, IgnoreNew", tc.name, s.ExecutionTimeLimit, s.Priority, s.MultipleInstancesPolicy, tc.limit)
		}
	}
	if _, err := taskDefinition(`C:\a.exe`, "format-c", `C:\plan.json`, 0); err == nil {
		t.Error("a task for an unknown subcommand was defined")
	}
}

func TestISODuration(t *testing.T) {
	for d, want := range map[string]string{"6h": "PT6H", "30m": "PT30M", "1h30m": "PT1H30M"} {
		dur, _ := time.ParseDuration(d)
		if got := isoDuration(dur); got != want {
			t.Errorf("%s: %s, want %s", d, got, want)
		}
	}
}
