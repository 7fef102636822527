//go:build !windows

package windows

import (
	"context"
	"errors"

	"winpool.dev/agent/internal/host"
)

// New fails off Windows: the simulated fleet runs NewOn over a fake Machine.
func New(Options) (host.Host, error) {
	return nil, errors.New("the Windows host only runs on Windows (the simulated fleet runs NewOn over a fake machine)")
}

// RunContainerdSwap is the containerd upgrade task, which runs on Windows only.
func RunContainerdSwap(context.Context, string) (host.RuntimeUpgrade, error) {
	return host.RuntimeUpgrade{}, errors.New("the containerd upgrade task only runs on Windows")
}

// RunServicing is the servicing task, which runs on Windows only.
func RunServicing(context.Context, string) (host.UpdateTask, error) {
	return host.UpdateTask{}, errors.New("the servicing task only runs on Windows")
}
