package windows

import (
	"testing"
	"time"

	"winpool.dev/agent/internal/host"
)

// A search costs the update source a scan: one at a time, and one per
// interval, counted from the last answer (a failed one too).
func TestTheUpdateSourceIsSearchedOncePerInterval(t *testing.T) {
	at := time.Date(2026, 12, 8, 18, 0, 0, 0, time.UTC)
	answered := host.NewestOffer{KB: "KB5050002", SearchedAt: at}
	failed := host.NewestOffer{Err: "searching: 0x80244022", SearchedAt: at}
	for _, c := range []struct {
		name    string
		last    host.NewestOffer
		running bool
		now     time.Time
		want    bool
	}{
		{"never searched", host.NewestOffer{}, false, at, true},
		{"one runs", host.NewestOffer{}, true, at, false},
		{"within the interval", answered, false, at.Add(59 * time.Minute), false},
		{"the interval passed", answered, false, at.Add(time.Hour), true},
		{"a failure within the interval", failed, false, at.Add(time.Minute), false},
	} {
		if got := searchDue(c.last, c.running, c.now, time.Hour); got != c.want {
			t.Errorf("%s: due %v, want %v", c.name, got, c.want)
		}
	}
}
