package windows

import (
	"regexp"
	"strings"
)

// CSIProxyService is the host service CSI Proxy runs as (AKS, and the
// csi-proxy project's install instructions: sc.exe create csiproxy …).
const CSIProxyService = "csiproxy"

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
