//go:build !windows

package windows

import (
	"errors"

	"winpool.dev/agent/internal/host"
)

// New fails off Windows; the simulated host is host/fake.
func New(Options) (host.Host, error) {
	return nil, errors.New("the Windows host only runs on Windows (the simulated fleet uses the fake host)")
}
