//go:build windows

package windows

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
)

// installUpdate is the servicing task's installer (RunServicing): it
// installs the plan's update from where the revision says, in the task's
// own process, outside the agent's pod.
func installUpdate(ctx context.Context, p servicingPlan, req host.UpdateRequest) (host.UpdateResult, error) {
	// The task runs with the machine's environment: the agent's proxy
	// settings come with the plan (servicingtask.go), and are set before
	// anything reads them (net/http reads them once).
	for k, v := range p.Proxy {
		if err := os.Setenv(k, v); err != nil {
			return host.UpdateResult{}, fmt.Errorf("setting %s from the plan: %w", k, err)
		}
	}
	switch req.Source {
	case config.SourcePackages:
		return installPackages(ctx, p.StateDir, req)
	case config.SourceWindowsUpdate, "":
		wu, err := openWUA()
		if err != nil {
			return host.UpdateResult{}, err
		}
		defer wu.Close()
		return installFromWindowsUpdate(ctx, wu, req)
	}
	return host.UpdateResult{}, fmt.Errorf("unknown update source %q", req.Source)
}

// installPackages installs the revision's packages with DISM (packages.go),
// staging them under <stateDir>\updates.
func installPackages(ctx context.Context, stateDir string, req host.UpdateRequest) (host.UpdateResult, error) {
	running, err := readBuild(winSystem{})
	if err != nil {
		return host.UpdateResult{}, err
	}
	s := servicing{dir: filepath.Join(stateDir, "updates"), client: &http.Client{}, dism: dism}
	return s.install(ctx, req, running)
}

// dism runs DISM /Online /Add-Package /PackagePath:<path> /NoRestart: the
// reboot is the agent's to make, after it reported Rebooting. It returns
// DISM's exit code; err only when DISM could not be run at all.
func dism(ctx context.Context, packagePath string) (int, error) {
	exe := filepath.Join(systemRoot(), "System32", "Dism.exe")
	cmd := exec.CommandContext(ctx, exe, "/Online", "/Add-Package", "/PackagePath:"+packagePath, "/NoRestart", "/Quiet", "/English")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit) && ctx.Err() == nil:
		return exit.ExitCode(), nil
	}
	return 0, fmt.Errorf("running %s: %w (output %q)", exe, err, strings.TrimSpace(string(out)))
}
