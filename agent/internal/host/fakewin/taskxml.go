package fakewin

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// taskDefinition is a registered task as Task Scheduler reads its XML
// (Task Scheduler schema, "Task Scheduler Schema Elements" in Microsoft's
// documentation): what is left out takes the schema's default.
type taskDefinition struct {
	XMLName   xml.Name `xml:"http://schemas.microsoft.com/windows/2004/02/mit/task Task"`
	UserID    string   `xml:"Principals>Principal>UserId"`
	RunLevel  string   `xml:"Principals>Principal>RunLevel"`
	Settings  taskSettings
	Command   string `xml:"Actions>Exec>Command"`
	Arguments string `xml:"Actions>Exec>Arguments"`
}

type taskSettings struct {
	// Both default to true.
	DisallowStartIfOnBatteries *bool
	StopIfGoingOnBatteries     *bool
	ExecutionTimeLimit         string
}

// readTaskDefinition parses definition as RegisterTask does: a document it
// cannot read is SCHED_E_MALFORMEDXML.
func readTaskDefinition(definition string) (taskDefinition, error) {
	var def taskDefinition
	d := xml.NewDecoder(strings.NewReader(definition))
	// RegisterTask takes a BSTR: the declared encoding (UTF-16) is the
	// string's own.
	d.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	if err := d.Decode(&def); err != nil {
		return def, fmt.Errorf("the task XML is malformed (0x80041318, SCHED_E_MALFORMEDXML): %w", err)
	}
	if def.Command == "" {
		return def, fmt.Errorf("the task XML has no Exec action (0x80041319, SCHED_E_MISSINGNODE)")
	}
	return def, nil
}

func (d taskDefinition) disallowOnBatteries() bool {
	return d.Settings.DisallowStartIfOnBatteries == nil || *d.Settings.DisallowStartIfOnBatteries
}

// runsAsSystem: the task's principal is LocalSystem with its full token.
func (d taskDefinition) runsAsSystem() bool {
	user := strings.ToUpper(d.UserID)
	return (user == "S-1-5-18" || user == "SYSTEM" || user == `NT AUTHORITY\SYSTEM`) && d.RunLevel == "HighestAvailable"
}
