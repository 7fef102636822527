package host

import (
	"strings"
	"testing"
)

// A patch level comes from the revision ConfigMap (and a build from the
// registry and the kubelet): what ParseBuild accepts must be what the
// operator's parser accepts (src/decision/versions.rs: dot-separated digits,
// no sign), and must print back as the same build.
func FuzzParseBuild(f *testing.F) {
	for _, s := range []string{"10.0.20348.2762", " 10.0.17763.6414\r\n", "10.0.20348", "10.0.20348.99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBuild(s)
		if err != nil {
			return
		}
		if strings.Trim(strings.TrimSpace(s), "0123456789.") != "" {
			t.Fatalf("ParseBuild(%q) accepted more than digits and dots: %+v", s, b)
		}
		if again, err := ParseBuild(b.String()); err != nil || again != b {
			t.Fatalf("ParseBuild(%q) = %+v prints as %q, which reads back as %+v, %v", s, b, b.String(), again, err)
		}
	})
}
