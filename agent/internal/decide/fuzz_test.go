package decide

import (
	"testing"
	"time"
)

// The install budget is the operation's spec.installBudget, the one bound on
// a servicing task that runs as SYSTEM: whatever it says, the agent's cap is
// positive and at most MaxUpdateTaskTimeout, and a budget it takes means what
// it says, spelled any way Go spells a duration.
func FuzzInstallBudget(f *testing.F) {
	for _, s := range []string{"14400s", "90m0s", "72h", "", "4 hours", "-1h", "0s", "73h", "9999999h", "1h0.5m", ".5us"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := InstallBudget(s)
		if d == 0 {
			if p, err := time.ParseDuration(s); err == nil && p > 0 && p <= MaxUpdateTaskTimeout {
				t.Fatalf("InstallBudget(%q) refused %s", s, p)
			}
			return
		}
		if p, err := time.ParseDuration(s); err != nil || p != d || d < 0 || d > MaxUpdateTaskTimeout {
			t.Fatalf("InstallBudget(%q) = %s, out of (0, %s] or not what it says", s, d, MaxUpdateTaskTimeout)
		}
		if again := InstallBudget(d.String()); again != d {
			t.Fatalf("InstallBudget(%q) = %s, which reads back as %s", s, d, again)
		}
	})
}
