package windows

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerifyDigests(t *testing.T) {
	a, b, c := digest("agent"), digest("plan"), digest("containerd")
	written := fileDigests{`C:\w\winpool-agent.exe`: a, `C:\w\plan.json`: b, `C:\w\new\containerd.exe`: c}
	for _, tc := range []struct {
		name    string
		written fileDigests
		now     map[string]string // a path missing here is gone
		readErr map[string]error
		words   []string // nil: no error
	}{
		{"nothing recorded", fileDigests{}, nil, nil, nil},
		{"all as written", written, map[string]string{`C:\w\winpool-agent.exe`: a, `C:\w\plan.json`: b, `C:\w\new\containerd.exe`: c}, nil, nil},
		{"the agent's copy swapped", written, map[string]string{`C:\w\winpool-agent.exe`: digest("evil"), `C:\w\plan.json`: b, `C:\w\new\containerd.exe`: c}, nil,
			[]string{`C:\w\winpool-agent.exe changed after the agent wrote it for the containerd upgrade task`, "was " + a + " when written", "is " + digest("evil") + " now", "not started"}},
		{"the first changed file by path", written, map[string]string{`C:\w\winpool-agent.exe`: digest("x"), `C:\w\plan.json`: digest("y"), `C:\w\new\containerd.exe`: digest("z")}, nil,
			[]string{`C:\w\new\containerd.exe changed`, "was " + c, "is " + digest("z")}},
		{"a file gone", written, map[string]string{`C:\w\winpool-agent.exe`: a, `C:\w\new\containerd.exe`: c}, nil,
			[]string{`C:\w\plan.json, written by the agent for the containerd upgrade task, is gone`}},
		{"a file that cannot be read", written, map[string]string{`C:\w\winpool-agent.exe`: a, `C:\w\plan.json`: b, `C:\w\new\containerd.exe`: c},
			map[string]error{`C:\w\plan.json`: errors.New("The process cannot access the file")},
			[]string{`hashing C:\w\plan.json again`, "cannot access"}},
	} {
		err := tc.written.verify("the containerd upgrade task", func(p string) (string, error) {
			if err := tc.readErr[p]; err != nil {
				return "", err
			}
			if d, ok := tc.now[p]; ok {
				return d, nil
			}
			return "", fmt.Errorf("open %s: %w", p, fs.ErrNotExist)
		})
		if tc.words == nil {
			if err != nil {
				t.Errorf("%s: %v, want none", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error, want one", tc.name)
			continue
		}
		for _, w := range tc.words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, err, w)
			}
		}
	}
}

func TestCopyHashed(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "winpool-agent.exe")
	os.WriteFile(src, []byte("the agent"), 0o700)
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("not the agent's"), 0o600)
	for _, tc := range []struct {
		name   string
		before func(dest string) // what is at dest before the copy
	}{
		{"nothing there", func(string) {}},
		{"an older copy", func(dest string) { os.WriteFile(dest, []byte("an older agent, longer than this one"), 0o700) }},
		{"a link to another file", func(dest string) { os.Symlink(victim, dest) }},
	} {
		work := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
		os.MkdirAll(work, 0o700)
		dest := filepath.Join(work, "winpool-agent.exe")
		tc.before(dest)
		sum, err := copyHashed(src, dest)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if sum != digest("the agent") {
			t.Errorf("%s: digest %s, want the sha256 of what was copied, %s", tc.name, sum, digest("the agent"))
		}
		if fi, err := os.Lstat(dest); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: dest is %v (%v), want a new plain file", tc.name, fi, err)
		}
		if b, _ := os.ReadFile(dest); string(b) != "the agent" {
			t.Errorf("%s: dest holds %q", tc.name, b)
		}
		if b, _ := os.ReadFile(victim); string(b) != "not the agent's" {
			t.Errorf("%s: the file a link pointed to was written: %q", tc.name, b)
		}
	}
}
