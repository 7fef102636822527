package versions

import (
	"fmt"
	"regexp"
	"strings"
)

// versionToken is a whole token that reads as a version: digits.digits.digits
// with an optional leading "v" and suffix ("-rc.3", "+azure-1", "~ds1").
// Requiring the dots keeps a commit hash from ever matching, even one made of
// digits only.
var versionToken = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+([-+~][0-9A-Za-z.+~-]*)?$`)

// FromContainerd reads `containerd --version`, which prints
// "containerd <package> <version> <revision>", e.g.
// "containerd github.com/containerd/containerd v1.7.22 7f7fdf5f…" → "1.7.22".
// The version is the first version-looking token after the package path; the
// revision after it is never read. Vendor suffixes are kept ("1.7.17+azure-1"):
// Compare ignores build metadata.
func FromContainerd(output string) (string, error) {
	for _, line := range strings.Split(output, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 3 || !isContainerdName(fields[0]) {
			continue
		}
		// fields[1] is the package path; the version follows it.
		if v := fields[2]; versionToken.MatchString(v) {
			return strings.TrimPrefix(v, "v"), nil
		}
		return "", fmt.Errorf("containerd --version printed %q: the token after the package path, %q, is not a version", strings.TrimSpace(line), fields[2])
	}
	return "", fmt.Errorf("containerd --version printed %q, not \"containerd <package> <version> <revision>\"", strings.TrimSpace(output))
}

func isContainerdName(s string) bool {
	return strings.EqualFold(s, "containerd") || strings.EqualFold(s, "containerd.exe")
}
