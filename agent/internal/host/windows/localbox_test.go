package windows

import (
	"io/fs"
	"os"
	"time"
)

// localBox is Box on the test's own process and files: what a unit test of
// one piece of logic needs of the machine when that piece is not the point.
type localBox struct{}

func (localBox) Now() time.Time                     { return time.Now() }
func (localBox) SinceBoot() time.Duration           { return time.Hour }
func (localBox) Executable() (string, error)        { return os.Executable() }
func (localBox) Getenv(k string) string             { return os.Getenv(k) }
func (localBox) Setenv(k, v string) error           { return os.Setenv(k, v) }
func (localBox) Stat(p string) (fs.FileInfo, error) { return os.Stat(p) }
func (localBox) FreeBytes(string) (int64, error)    { return 64 << 30, nil }
func (localBox) ProductVersion(string) string       { return "" }

// localMachine runs programs for real, on this process's files.
func localMachine() Machine { return Machine{Programs: execPrograms{}, Box: localBox{}} }
