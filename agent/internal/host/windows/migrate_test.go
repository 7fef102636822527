package windows

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMigrateArgs(t *testing.T) {
	// containerd 2.x: the global --config before the subcommand.
	want := []string{"--config", `C:\Program Files\containerd\config.toml`, "config", "migrate"}
	if got := migrateArgs(`C:\Program Files\containerd\config.toml`); !slices.Equal(got, want) {
		t.Errorf("migrateArgs = %q, want %q", got, want)
	}
}

// fakeContainerd writes a shell script standing in for containerd: it checks
// its arguments, then prints and exits as told.
func fakeContainerd(t *testing.T, script string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the fake containerd is a shell script")
	}
	p := filepath.Join(t.TempDir(), "containerd")
	body := "#!/bin/sh\n" +
		`if [ "$1" != --config ] || [ "$3" != config ] || [ "$4" != migrate ] || [ $# -ne 4 ]; then echo "unexpected arguments: $*" >&2; exit 64; fi` + "\n" +
		script + "\n"
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMigrateConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("version = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, script string
		path         string
		want         string
		wantErr      []string // substrings; none wants success
	}{
		{
			name:   "migrated, warnings on stderr left out",
			script: `echo 'time="..." level=warning msg="Ignoring unknown key"' >&2; cat "$2" >/dev/null && printf 'version = 3\n'`,
			path:   cfg, want: "version = 3\n",
		},
		{
			name:    "fails: command, exit code and stderr",
			script:  `echo 'failed to load plugin config' >&2; exit 3`,
			path:    cfg,
			wantErr: []string{" --config " + cfg + " config migrate", "exit code 3", "failed to load plugin config"},
		},
		{
			// containerd would print its defaults for a missing file.
			name:    "config missing",
			script:  `printf 'version = 3\n'`,
			path:    filepath.Join(t.TempDir(), "missing.toml"),
			wantErr: []string{"missing.toml"},
		},
	} {
		bin := fakeContainerd(t, tc.script)
		out, err := migrateConfig(context.Background(), localMachine(), bin, tc.path)
		if len(tc.wantErr) == 0 {
			if err != nil || string(out) != tc.want {
				t.Errorf("%s: migrateConfig = %q, %v; want %q", tc.name, out, err, tc.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: migrateConfig = %q, want an error", tc.name, out)
			continue
		}
		for _, w := range tc.wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: migrateConfig error %q does not name %q", tc.name, err, w)
			}
		}
	}
}

func TestMigrateConfigDeadline(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := fakeContainerd(t, "exec sleep 10")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := migrateConfig(ctx, localMachine(), bin, cfg)
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("migrateConfig on a hung containerd = %v, want the deadline", err)
	}
}

func TestTail(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcd", 4, "abcd"},
		{"0123456789", 4, "…6789"},
		// A cut inside a multi-byte rune drops its remains.
		{"aé", 1, "…"},
	} {
		if got := tail(tc.s, tc.n); got != tc.want {
			t.Errorf("tail(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
