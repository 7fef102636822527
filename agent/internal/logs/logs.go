// Package logs sends the agent's log to stdout (what `kubectl logs` shows,
// as long as the pod exists) and to a rotated file on the host, which
// outlives the pod, its restarts and the node's reboots: the place to read
// what the agent did before the node went down.
package logs

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"gopkg.in/natefinch/lumberjack.v2"
)

// Rotation of the log file: a few days of a busy agent, bounded on disk.
const (
	FileName   = "winpool-agent.log"
	MaxSizeMB  = 20
	MaxBackups = 5
	MaxAgeDays = 30
)

// DefaultDir is %ProgramData%\winpool\logs.
func DefaultDir() string {
	base := os.Getenv("ProgramData")
	if base == "" {
		base = `C:\ProgramData`
	}
	return filepath.Join(base, "winpool", "logs")
}

// New logs JSON lines to stdout and, when dir is not "", to dir/name
// (rotated at MaxSizeMB, MaxBackups old files kept, compressed). Close
// the returned closer on exit.
func New(stdout io.Writer, dir, name string) (*slog.Logger, io.Closer) {
	if dir == "" {
		return slog.New(slog.NewJSONHandler(stdout, nil)), io.NopCloser(nil)
	}
	file := &lumberjack.Logger{
		Filename:   filepath.Join(dir, name),
		MaxSize:    MaxSizeMB,
		MaxBackups: MaxBackups,
		MaxAge:     MaxAgeDays,
		Compress:   true,
	}
	return slog.New(slog.NewJSONHandler(io.MultiWriter(stdout, file), nil)), file
}
