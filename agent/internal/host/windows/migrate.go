package windows

import (
	"context"
	"fmt"
	"strings"
)

// maxStderr bounds how much of a failed command's stderr goes into its
// error, which ends up in the upgrade's result message.
const maxStderr = 2048

// migrateArgs are containerd's arguments for migrating the config at path.
// --config is a global flag of containerd's CLI (urfave/cli): it has to come
// before the subcommand, which reads it from its parent; after it, it is an
// unknown flag. containerd 2.x prints the config migrated to its newest
// version on stdout and logs to stderr.
func migrateArgs(path string) []string {
	return []string{"--config", path, "config", "migrate"}
}

// migrateConfig runs `<containerd> --config <path> config migrate` and
// returns what it printed.
func migrateConfig(ctx context.Context, m Machine, containerd, path string) ([]byte, error) {
	// containerd treats a missing config as an empty one and prints its
	// defaults, which would pass for the node's config migrated.
	if _, err := m.Box.Stat(path); err != nil {
		return nil, fmt.Errorf("migrating containerd's config: %w", err)
	}
	args := migrateArgs(path)
	out, err := m.Programs.Run(ctx, containerd, args...)
	if err == nil && out.ExitCode == 0 {
		return out.Stdout, nil
	}
	command := strings.Join(append([]string{containerd}, args...), " ")
	msg := tail(strings.TrimSpace(string(out.Stderr)), maxStderr)
	// A command killed because the context ran out has no exit code worth
	// reporting; the deadline is the reason.
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w (stderr %q)", command, ctx.Err(), msg)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	return nil, fmt.Errorf("%s: exit code %d (stderr %q)", command, out.ExitCode, msg)
}

// tail is s's last n bytes: a command's last words on stderr say why it
// failed.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + strings.ToValidUTF8(s[len(s)-n:], "")
}
