package windows

import (
	"strings"

	"winpool.dev/agent/internal/host"
)

// nssmParametersKey is where NSSM keeps what it runs for a service (under
// HKLM): Application (REG_EXPAND_SZ), AppParameters, AppDirectory, ….
func nssmParametersKey(service string) string {
	return `SYSTEM\CurrentControlSet\Services\` + service + `\Parameters`
}

// serviceWrapper is the service wrapper a service's ImagePath runs, if any.
// Only the executable's name tells: AKS puts nssm.exe in C:\k, other images
// elsewhere, and Windows file names are case-insensitive.
func serviceWrapper(imagePath string) host.Wrapper {
	switch strings.ToLower(windowsBase(serviceBinary(imagePath))) {
	case "nssm.exe", "nssm":
		return host.WrapperNSSM
	}
	return host.WrapperNone
}

// serviceProgram is the program a service runs. Under NSSM the ImagePath is
// nssm.exe itself, and the program is its Parameters\Application (already
// expanded; "" when NSSM has none, which leaves the program unknown).
func serviceProgram(imagePath string, wrapper host.Wrapper, nssmApplication string) string {
	if wrapper == host.WrapperNSSM {
		// nssm install stores the path as given; a hand-edited value may
		// carry the quotes a command line would need.
		return strings.Trim(strings.TrimSpace(nssmApplication), `"`)
	}
	return serviceBinary(imagePath)
}

// windowsBase is a Windows path's last element; path/filepath splits at
// backslashes only when built for Windows, and this code is decided and
// tested on any platform.
func windowsBase(p string) string {
	if i := strings.LastIndexAny(p, `\/`); i >= 0 {
		return p[i+1:]
	}
	return p
}
