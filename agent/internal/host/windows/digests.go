package windows

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"time"

	"winpool.dev/agent/internal/runtimeswap"
	"winpool.dev/agent/internal/stage"
)

// fileDigests are the sha256 digests (lowercase hex) of the files a SYSTEM
// task runs or installs (the containerd upgrade task, the servicing task),
// by path, recorded when the agent wrote them and checked again right
// before the task is started: a file changed in between is never run or
// installed as SYSTEM.
type fileDigests map[string]string

// add records the digest of path as it is now, just written.
func (d fileDigests) add(path string) error {
	sum, err := stage.Digest(path)
	if err != nil {
		return fmt.Errorf("hashing %s: %w", path, err)
	}
	d[path] = sum
	return nil
}

// changedError is a file that is not what the agent wrote for Task.
type changedError struct{ Task, Path, Written, Now string }

func (e *changedError) Error() string {
	return fmt.Sprintf("%s changed after the agent wrote it for %s: its sha256 was %s when written and is %s now; "+
		"the task was not started", e.Path, e.Task, e.Written, e.Now)
}

// verify hashes every recorded file again with digest (stage.Digest; a
// test passes another) and returns an error naming the first file, by path,
// that changed (with both digests) or cannot be read any more. task names
// the task the files are for ("the containerd upgrade task"), for the
// message.
func (d fileDigests) verify(task string, digest func(path string) (string, error)) error {
	paths := make([]string, 0, len(d))
	for p := range d {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		now, err := digest(p)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s, written by the agent for %s, is gone: the task was not started", p, task)
		}
		if err != nil {
			return fmt.Errorf("hashing %s again before %s: %w; the task was not started", p, task, err)
		}
		if now != d[p] {
			return &changedError{Task: task, Path: p, Written: d[p], Now: now}
		}
	}
	return nil
}

// copyHashed copies src to a new file dest (one already at dest is removed
// first, so dest is always a file the agent created) and returns the sha256
// of what it wrote.
func copyHashed(src, dest string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	if err := os.Remove(dest); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	out, err := os.OpenFile(dest, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o700)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(out, h), in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// plan writes a task's plan file, records its digest, and returns the task's
// definition (taskDefinition: exe running subcommand on the plan) once every file written for the task
// has been hashed again (rehash nil: stage.Digest). Both tasks call it
// before they write the result the agent waits on, so a file changed under
// them never leaves the agent waiting for a task that does not start.
func (d fileDigests) plan(planFile string, plan any, exe, subcommand, task string, agentCap time.Duration, rehash func(string) (string, error)) (string, error) {
	if err := runtimeswap.WriteJSON(planFile, plan); err != nil {
		return "", err
	}
	if err := d.add(planFile); err != nil {
		return "", err
	}
	definition, err := taskDefinition(exe, subcommand, planFile, agentCap)
	if err != nil {
		return "", err
	}
	if rehash == nil {
		rehash = stage.Digest
	}
	if err := d.verify(task, rehash); err != nil {
		return "", err
	}
	return definition, nil
}
