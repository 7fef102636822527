package fakewin_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/host/fakewin"
	"winpool.dev/agent/internal/host/windows"
)

// wsus is a simulated WSUS whose approval a test moves.
type wsus struct {
	mu        sync.Mutex
	build     host.Build
	published time.Time
}

func (w *wsus) approve(b host.Build, published time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.build, w.published = b, published
}

func (w *wsus) approved() (host.Build, time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.build, w.published, w.build != host.Build{}
}

// newestOffer asks until a search newer than after has answered.
func newestOffer(t *testing.T, h *windows.Host, every time.Duration, after time.Time) host.NewestOffer {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if o := h.NewestOffer(context.Background(), every); o.SearchedAt.After(after) {
			return o
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no search answered after %s", after)
	return host.NewestOffer{}
}

// The newest cumulative update is what the update source offers this host
// (WSUS: what its administrator approved), named by its KB and publication
// time, searched again only once the interval has passed, and nothing once
// the host runs it.
func TestTheNewestOfferIsWhatTheUpdateSourceApprovesForTheHost(t *testing.T) {
	w := &wsus{}
	tuesday := time.Date(2026, 12, 8, 18, 0, 0, 0, time.UTC)
	w.approve(host.Build{Major: 10, Build: 20348, UBR: 2800}, tuesday)
	_, h := boot(t, aks(fakewin.Catalogue{Approved: w.approved}))

	first := newestOffer(t, h, time.Hour, time.Time{})
	if first.KB != "KB5002800" || !first.Published.Equal(tuesday) || first.Err != "" {
		t.Fatalf("offer %+v, want KB5002800 published %s", first, tuesday)
	}
	w.approve(host.Build{Major: 10, Build: 20348, UBR: 2900}, tuesday.AddDate(0, 1, 0))
	if again := h.NewestOffer(context.Background(), time.Hour); !reflect.DeepEqual(again, first) {
		t.Fatalf("within the interval: %+v, want the last answer", again)
	}
	if moved := newestOffer(t, h, 0, first.SearchedAt); moved.KB != "KB5002900" {
		t.Fatalf("once the interval passed: %+v, want the newly approved KB5002900", moved)
	}
	w.approve(host.Build{Major: 10, Build: 20348, UBR: 2762}, tuesday)
	if current := newestOffer(t, h, 0, time.Now()); current.KB != "" {
		t.Fatalf("a host at the approved build is offered %+v, want nothing", current)
	}
}

// A source that offers only .NET Framework's cumulative update (same
// classification as the OS's, in English or German) offers no patch
// level: the pool would roll to it and no node's build would move.
func TestADotNetFrameworkUpdateOfferedAloneIsNoPatchLevel(t *testing.T) {
	for _, localized := range []bool{false, true} {
		_, h := boot(t, aks(fakewin.Catalogue{DotNetOnly: true, Localized: localized}))
		o := newestOffer(t, h, time.Hour, time.Time{})
		if o.KB != "" || o.Err != "" {
			t.Errorf("localized %v: offer %+v, want nothing (only .NET Framework's update is offered)", localized, o)
		}
		if len(o.PassedOver) != 1 || !strings.HasPrefix(o.PassedOver[0], "KB5050003: ") {
			t.Errorf("localized %v: passed over %q, want .NET Framework's KB5050003 named", localized, o.PassedOver)
		}
	}
}
