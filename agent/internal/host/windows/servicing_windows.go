//go:build windows

package windows

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
)

// InstallUpdate installs the revision's update from where the revision says.
func (h *Host) InstallUpdate(ctx context.Context, req host.UpdateRequest) (host.UpdateResult, error) {
	switch req.Source {
	case config.SourcePackages:
		return h.installPackages(ctx, req)
	case config.SourceWindowsUpdate, "":
		return installFromWindowsUpdate(ctx, req)
	}
	return host.UpdateResult{}, fmt.Errorf("unknown update source %q", req.Source)
}

// installPackages installs the revision's packages with DISM (packages.go).
func (h *Host) installPackages(ctx context.Context, req host.UpdateRequest) (host.UpdateResult, error) {
	running, err := readBuild()
	if err != nil {
		return host.UpdateResult{}, err
	}
	s := servicing{dir: filepath.Join(h.o.StateDir, "updates"), client: &http.Client{}, dism: dism}
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
