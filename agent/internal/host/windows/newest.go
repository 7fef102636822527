package windows

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"time"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
)

// The newest cumulative update offered, for a pool whose patch level follows
// its update source (os.patchPolicy): the install's own search and its own
// selection of the OS's cumulative update, with no target and no pin, so
// what the operator resolves from the agents' answers is exactly what an
// install would take. WSUS decides by its approvals; Windows Update by what
// is released. A search costs the source a scan: one per interval.

type newestSearch struct {
	mu      sync.Mutex
	last    host.NewestOffer
	running bool
}

// NewestOffer implements host.Host.
func (h *Host) NewestOffer(_ context.Context, every time.Duration) host.NewestOffer {
	n := &h.newest
	n.mu.Lock()
	defer n.mu.Unlock()
	now := h.m.Box.Now()
	if searchDue(n.last, n.running, now, every) {
		n.running = true
		go func() {
			found := searchNewest(h.m)
			found.SearchedAt = h.m.Box.Now()
			n.mu.Lock()
			defer n.mu.Unlock()
			n.running = false
			if found.Err != "" {
				// The last answer stands, with the failure beside it.
				kept := n.last
				kept.Err, kept.SearchedAt = found.Err, found.SearchedAt
				found = kept
			}
			n.last = found
		}()
	}
	return n.last
}

// searchDue: no search runs, and none has answered yet or the last
// answered (or failed) at least every ago.
func searchDue(last host.NewestOffer, running bool, now time.Time, every time.Duration) bool {
	return !running && (last.SearchedAt.IsZero() || now.Sub(last.SearchedAt) >= every)
}

// searchNewest is one search and the install's selection on its answer: the
// last update SelectWindowsUpdates picks is the cumulative update (servicing
// stack updates go before it).
func searchNewest(m Machine) host.NewestOffer {
	wu, done, err := m.WindowsUpdate()
	if err != nil {
		return host.NewestOffer{Err: err.Error()}
	}
	defer done()
	offered, err := wu.Search(wuSearch)
	if err != nil {
		return host.NewestOffer{Err: "searching: " + withThrownCode(err).Error()}
	}
	var passed []string
	for _, i := range decide.PassedOverAsNotOS(offered) {
		passed = append(passed, kbOf(offered[i])+": "+offered[i].Title)
	}
	chosen := decide.SelectWindowsUpdates(offered)
	if len(chosen) == 0 {
		return host.NewestOffer{PassedOver: passed}
	}
	u := offered[chosen[len(chosen)-1]]
	if u.Exclusive {
		// A servicing stack update alone: the cumulative update is offered
		// once it is in. Not a patch level.
		return host.NewestOffer{PassedOver: passed}
	}
	kb := kbOf(u)
	if !kbID.MatchString(kb) {
		return host.NewestOffer{Err: fmt.Sprintf("the cumulative update offered (%s) carries no KB ID the pool can name", u.Title)}
	}
	return host.NewestOffer{KB: kb, Title: u.Title, Published: u.Published, PassedOver: passed}
}

// kbID is a KB ID as the report's schema takes it.
var kbID = regexp.MustCompile(`^KB[0-9]{1,8}$`)
