package windows

import (
	"encoding/xml"
	"fmt"
	"time"

	"winpool.dev/agent/internal/decide"
)

// The subcommands of winpool-agent.exe that the agent's SYSTEM scheduled
// tasks run, with the plan file as their one argument (cmd/winpool-agent).
const (
	// ContainerdSwapCommand carries out a containerd upgrade plan
	// (RunContainerdSwap).
	ContainerdSwapCommand = "containerd-swap"
	// ServicingCommand carries out a servicing plan (RunServicing).
	ServicingCommand = "servicing"
)

// taskLimits is each task's default cap in the agent. Task Scheduler's
// ExecutionTimeLimit is twice the cap in effect, so Task Scheduler ends only
// a task the agent has long given up on (the default, 72 hours, would leave
// a hung task holding the node's servicing for three days).
var taskLimits = map[string]time.Duration{
	ServicingCommand:      decide.DefaultUpdateTaskTimeout,
	ContainerdSwapCommand: decide.DefaultRuntimeTaskTimeout,
}

// executionLimit is Task Scheduler's limit for a task the agent caps at
// agentCap (0: the task's default). Never under two minutes: PT0M would
// mean no limit at all.
func executionLimit(subcommand string, agentCap time.Duration) (time.Duration, bool) {
	def, ok := taskLimits[subcommand]
	if agentCap <= 0 {
		agentCap = def
	}
	return max(2*agentCap, 2*time.Minute), ok
}

// taskDefinition is the Task Scheduler XML (schema 1.2, Windows Server 2008
// and later) of a one-shot task running the task's copy of the agent on a
// plan, as SYSTEM. What schtasks /Create /TR would leave at its defaults is
// set, each for a reason a hardened or UPS-backed host shows:
//   - DisallowStartIfOnBatteries and StopIfGoingOnBatteries off: a UPS that
//     reports battery power would keep the task from starting, or stop it
//     mid-install (DISM mid-transaction);
//   - ExecutionTimeLimit from executionLimit, not 72 hours;
//   - Priority 4 (normal): the default 7 runs DISM and the download at
//     below-normal CPU and I/O priority;
//   - MultipleInstancesPolicy IgnoreNew: a second Run while one runs is a
//     no-op, never a second install.
//
// The program and its arguments are separate elements, so no command-line
// length limit applies (schtasks' /TR takes 261 characters).
func taskDefinition(exe, subcommand, plan string, agentCap time.Duration) (string, error) {
	limit, ok := executionLimit(subcommand, agentCap)
	if !ok {
		return "", fmt.Errorf("no scheduled task runs %q", subcommand)
	}
	t := taskXML{
		Version: "1.2", XMLNS: taskNamespace,
		Description: "winpool: " + subcommand + " (" + plan + ")",
		Principal:   taskPrincipal{ID: "System", UserID: systemSID, RunLevel: "HighestAvailable"},
		Settings: taskSettings{
			MultipleInstances: "IgnoreNew", DisallowOnBatteries: false, StopOnBatteries: false,
			AllowStartOnDemand: true, Enabled: true, Limit: isoDuration(limit), Priority: 4,
		},
		Actions: taskActions{Context: "System", Exec: taskExec{Command: exe, Arguments: fmt.Sprintf(`%s "%s"`, subcommand, plan)}},
	}
	out, err := xml.MarshalIndent(t, "", "  ")
	if err != nil {
		return "", err
	}
	// RegisterTask takes the XML as a BSTR: UTF-16 is its encoding.
	return `<?xml version="1.0" encoding="UTF-16"?>` + "\n" + string(out), nil
}

const (
	taskNamespace = "http://schemas.microsoft.com/windows/2004/02/mit/task"
	systemSID     = "S-1-5-18"
)

type taskXML struct {
	XMLName     xml.Name      `xml:"Task"`
	Version     string        `xml:"version,attr"`
	XMLNS       string        `xml:"xmlns,attr"`
	Description string        `xml:"RegistrationInfo>Description"`
	Principal   taskPrincipal `xml:"Principals>Principal"`
	Settings    taskSettings  `xml:"Settings"`
	Actions     taskActions   `xml:"Actions"`
}

type taskPrincipal struct {
	ID       string `xml:"id,attr"`
	UserID   string `xml:"UserId"`
	RunLevel string `xml:"RunLevel"`
}

type taskSettings struct {
	MultipleInstances   string `xml:"MultipleInstancesPolicy"`
	DisallowOnBatteries bool   `xml:"DisallowStartIfOnBatteries"`
	StopOnBatteries     bool   `xml:"StopIfGoingOnBatteries"`
	AllowStartOnDemand  bool   `xml:"AllowStartOnDemand"`
	Enabled             bool   `xml:"Enabled"`
	Limit               string `xml:"ExecutionTimeLimit"`
	Priority            int    `xml:"Priority"`
}

type taskActions struct {
	Context string   `xml:"Context,attr"`
	Exec    taskExec `xml:"Exec"`
}

type taskExec struct {
	Command   string `xml:"Command"`
	Arguments string `xml:"Arguments"`
}

// isoDuration is d as the schema's xs:duration in hours and minutes (PT6H,
// PT30M).
func isoDuration(d time.Duration) string {
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	switch {
	case m == 0:
		return fmt.Sprintf("PT%dH", h)
	case h == 0:
		return fmt.Sprintf("PT%dM", m)
	}
	return fmt.Sprintf("PT%dH%dM", h, m)
}

// startTask registers task name from its definition and runs it.
func startTask(ts TaskScheduler, name, definition string) error {
	if err := ts.RegisterTask(name, definition); err != nil {
		return fmt.Errorf("registering task %s: %w", name, err)
	}
	if err := ts.RunTask(name); err != nil {
		return fmt.Errorf("running task %s: %w", name, err)
	}
	return nil
}
