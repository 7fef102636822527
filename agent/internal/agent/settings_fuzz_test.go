package agent

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// The operator's DaemonSet sets these variables from the pool's spec: a
// value the agent takes is within its bounds and reads back the same, and
// one it refuses is an error naming the variable, never a zero taken.
func FuzzSettings(f *testing.F) {
	f.Add("", "", "")
	f.Add("1h", "1048576", "Disabled")
	f.Add("1s", "0", "false")
	f.Add("-5m", "20Mi", "enabled")
	f.Fuzz(func(t *testing.T, check, bandwidth, staging string) {
		refused := func(name string, err error) {
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("the error %q does not name %s", err, name)
			}
		}
		if d, err := ParsePatchCheck(check); err != nil {
			refused(PatchCheckEnv, err)
		} else if (check == "") != (d == 0) || d != 0 && d < minPatchCheck {
			t.Fatalf("ParsePatchCheck(%q) = %s", check, d)
		} else if again, _ := ParsePatchCheck(d.String()); d != 0 && again != d {
			t.Fatalf("ParsePatchCheck(%q) = %s, which reads back as %s", check, d, again)
		} else if p, err := time.ParseDuration(check); err == nil && d != max(p, minPatchCheck) {
			t.Fatalf("ParsePatchCheck(%q) = %s, not at least what it says", check, d)
		}
		if n, err := ParseStagingBandwidth(bandwidth); err != nil {
			refused(StagingBandwidthEnv, err)
		} else if n < 1 || bandwidth != "" && strconv.FormatInt(n, 10) != strings.TrimLeft(strings.TrimPrefix(bandwidth, "+"), "0") {
			t.Fatalf("ParseStagingBandwidth(%q) = %d", bandwidth, n)
		}
		if on, err := ParseStaging(staging); err != nil {
			refused(StagingEnv, err)
		} else if on != (staging != "Disabled") {
			t.Fatalf("ParseStaging(%q) = %v", staging, on)
		}
	})
}
