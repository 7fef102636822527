package windows

import (
	"regexp"
	"strings"

	"winpool.dev/agent/internal/host"
)

// csiProxyServices are the names CSI Proxy's host service is installed
// under, in the order they are looked for: AKS's node image installs
// "csi-proxy" under NSSM, the csi-proxy project's README has "csiproxy"
// created with sc.exe.
var csiProxyServices = []string{"csi-proxy", "csiproxy"}

// pickCSIProxy is the CSI Proxy service to report among those installed
// (given in csiProxyServices order). Only one of them can serve the pipes (a
// second csi-proxy.exe fails to create them), so a running one says more
// about the node than a stopped one left behind by an earlier install;
// among equals the earlier name wins. ok is false when none is installed.
func pickCSIProxy(installed []host.Service) (s host.Service, ok bool) {
	for _, c := range installed {
		if c.Running {
			return c, true
		}
	}
	if len(installed) == 0 {
		return host.Service{}, false
	}
	return installed[0], true
}

// csiProxyPipeVersions are the API versions CSI Proxy serves a named pipe
// for, per API group, newest first (client/groups in kubernetes-csi/
// csi-proxy: every release since v0.1.0 serves v1alpha1 of these four
// groups, v1.0.0 and later v1). Trying v1 first answers on the first dial
// on any current install; the older ones cover nodes that still run a
// pre-GA CSI Proxy.
var csiProxyPipeVersions = []struct {
	version string
	groups  []string
}{
	{"v1", []string{"filesystem", "disk", "volume", "smb"}},
	{"v1beta3", []string{"disk", "volume"}},
	{"v1beta2", []string{"filesystem", "disk", "volume", "smb"}},
	{"v1beta1", []string{"filesystem", "disk", "volume", "smb"}},
	{"v1alpha1", []string{"filesystem", "disk", "volume", "smb"}},
}

// csiProxyPipes are the named pipes CSI Proxy listens on, in the order they
// are dialled: \\.\pipe\csi-proxy-<group>-<version>, the path CSI node
// plugins mount (csi-proxy's client.PipePath).
func csiProxyPipes() []string {
	var pipes []string
	for _, v := range csiProxyPipeVersions {
		for _, g := range v.groups {
			pipes = append(pipes, `\\.\pipe\csi-proxy-`+g+"-"+v.version)
		}
	}
	return pipes
}

// serviceBinary is the executable of a service's ImagePath / binPath, which
// may be quoted and is followed by the service's arguments.
func serviceBinary(binPath string) string {
	s := strings.TrimSpace(binPath)
	if strings.HasPrefix(s, `"`) {
		if end := strings.Index(s[1:], `"`); end >= 0 {
			return s[1 : end+1]
		}
		return strings.Trim(s, `"`)
	}
	// Unquoted: the path ends at ".exe" (paths with spaces are quoted when
	// they have arguments, but not always when they have none).
	if i := strings.Index(strings.ToLower(s), ".exe"); i >= 0 {
		return s[:i+len(".exe")]
	}
	if i := strings.IndexByte(s, ' '); i >= 0 {
		return s[:i]
	}
	return s
}

var pathVersion = regexp.MustCompile(`(?i)(?:^|[\\/_-])v?([0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.]+)?)(?:[\\/_]|\.exe$|$)`)

// csiProxyVersion is the version of the running CSI Proxy: the binary's
// version resource when it has one (ProductVersion), else a version in its
// path (installers put it in the folder or file name, e.g.
// C:\k\csi-proxy\v1.1.3\csi-proxy.exe); "unknown" when neither says.
func csiProxyVersion(productVersion, binary string) string {
	if v := strings.TrimSpace(productVersion); v != "" && v != "0.0.0.0" {
		return strings.TrimPrefix(v, "v")
	}
	if m := pathVersion.FindStringSubmatch(binary); m != nil {
		return m[1]
	}
	return "unknown"
}
