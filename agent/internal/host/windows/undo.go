package windows

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"winpool.dev/agent/internal/host"
)

// Taking a cumulative update off (rollout.undo). Since the servicing stack
// and the cumulative update ship combined, wusa /uninstall no longer removes
// one; Microsoft's way is DISM /Remove-Package with the cumulative update's
// package name, which /Get-Packages lists as Package_for_RollupFix~…~<build
// and revision>. The servicing stack (Package_for_ServicingStack…) cannot be
// removed, and is never asked to be.

// removalCalls are the two DISM runs a removal makes: one program run each.
type removalCalls interface {
	// Packages is DISM /Online /Get-Packages /Format:Table /English: its
	// output, or its exit code when it failed.
	Packages(ctx context.Context) (table string, exitCode int, err error)
	// Remove is DISM /Online /Remove-Package /PackageName:<name> /NoRestart:
	// its exit code; err only when DISM could not be run at all.
	Remove(ctx context.Context, name string) (int, error)
}

// rollupPrefix names cumulative update packages in DISM's listing.
const rollupPrefix = "package_for_rollupfix~"

// removeCumulative removes the cumulative update whose package is of build
// running (10.0.20348.2762: Package_for_RollupFix~…~~20348.2762.x.y) and
// says what it removed; the reboot is the agent's.
func removeCumulative(ctx context.Context, dism removalCalls, running host.Build) (host.UpdateResult, error) {
	table, code, err := dism.Packages(ctx)
	if err != nil {
		return host.UpdateResult{}, fmt.Errorf("listing the installed packages (DISM /Get-Packages): %w", err)
	}
	if code != 0 {
		return host.UpdateResult{ExitCode: code, Detail: "DISM /Get-Packages"}, nil
	}
	name, listed := cumulativePackage(table, running)
	if name == "" {
		return host.UpdateResult{}, fmt.Errorf("no cumulative update package of build %s is installed (DISM lists %s): the build came with the image, "+
			"or a hotpatch, and has nothing to remove", running, orNone(listed))
	}
	code, err = dism.Remove(ctx, name)
	if err != nil {
		return host.UpdateResult{}, err
	}
	return host.UpdateResult{ExitCode: code, Detail: "DISM /Remove-Package " + name}, nil
}

// cumulativePackage finds, in DISM's /Format:Table listing (Package
// Identity | State | Release Type | Install Time), the Installed
// cumulative update package of build b; listed: the cumulative update
// packages seen, for the message when none matches.
func cumulativePackage(table string, b host.Build) (name string, listed []string) {
	want := fmt.Sprintf("~~%d.%d.", b.Build, b.UBR)
	for _, line := range strings.Split(table, "\n") {
		cols := strings.Split(line, "|")
		if len(cols) < 2 {
			continue
		}
		id, state := strings.TrimSpace(cols[0]), strings.TrimSpace(cols[1])
		if !strings.HasPrefix(strings.ToLower(id), rollupPrefix) {
			continue
		}
		listed = append(listed, id+" ("+state+")")
		if strings.EqualFold(state, "Installed") && strings.Contains(id, want) {
			name = id
		}
	}
	return name, listed
}

// dismRunner runs Dism.exe on m.
type dismRunner struct{ m Machine }

func (d dismRunner) exe() string {
	return filepath.Join(systemRoot(d.m.Box.Getenv), "System32", "Dism.exe")
}

func (d dismRunner) Packages(ctx context.Context) (string, int, error) {
	out, err := d.m.Programs.Run(ctx, d.exe(), "/Online", "/Get-Packages", "/Format:Table", "/English")
	if err != nil {
		return "", 0, fmt.Errorf("running %s: %w", d.exe(), err)
	}
	return string(out.Stdout), out.ExitCode, nil
}

func (d dismRunner) Remove(ctx context.Context, name string) (int, error) {
	out, err := d.m.Programs.Run(ctx, d.exe(), "/Online", "/Remove-Package", "/PackageName:"+name, "/NoRestart", "/Quiet", "/English")
	if err != nil {
		return 0, fmt.Errorf("running %s: %w (output %q)", d.exe(), err, strings.TrimSpace(string(out.Stdout)+string(out.Stderr)))
	}
	return out.ExitCode, nil
}
