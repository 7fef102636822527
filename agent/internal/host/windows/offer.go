package windows

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
)

// Preflight's offer check: before the node is cordoned, one read-only
// Windows Update search (the install's own criteria, against WSUS when the
// policy names one) and the install's own selection on its answer, so an
// update WSUS has not approved, a deferral policy, or a pinned KB that does
// not apply blocks the node instead of failing it after its drain. A search
// costs the source a scan: one per revision and agent process, kept.

// offerSearchTimeout is how long a search may take before preflight says
// so; WSUS answers within a minute or two, Windows Update's first scan of a
// month in several.
const offerSearchTimeout = 15 * time.Minute

// offerWait is how long an ask waits for a search it finds running: a WSUS
// that has scanned the node before answers within it, so the verdict rides
// the agent's next report, not one after.
const offerWait = 2 * time.Second

// offerSearches keeps, per revision, the one search made for it.
type offerSearches struct {
	mu   sync.Mutex
	runs map[string]*offerRun
}

type offerRun struct {
	started time.Time
	ended   chan struct{}
	done    bool
	offer   host.UpdateOffer
}

// offer is the revision's offer; the ask that starts the search waits up to
// offerWait for it, later asks while it runs do not (the agent's loop is not
// held every recheck).
func (o *offerSearches) offer(m Machine, req host.UpdateRequest, now time.Time) host.UpdateOffer {
	offer, ended := o.ask(m, req, now)
	if ended == nil {
		return offer
	}
	select {
	case <-ended:
		offer, _ = o.ask(m, req, now)
	case <-time.After(offerWait):
	}
	return offer
}

// ask is the revision's offer: the answer of its search, or Searching
// while it runs (started on the first ask, on a goroutine of its own: the
// Windows Update Agent's Search has no deadline), with the channel its end
// closes to the ask that started it. A failed search is made again on the
// next ask after it.
func (o *offerSearches) ask(m Machine, req host.UpdateRequest, now time.Time) (host.UpdateOffer, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.runs == nil {
		o.runs = map[string]*offerRun{}
	}
	r, ok := o.runs[req.Revision]
	switch {
	case ok && r.done && r.offer.Err != "":
		delete(o.runs, req.Revision)
		return r.offer, nil
	case ok && r.done:
		return r.offer, nil
	case ok && now.Sub(r.started) > offerSearchTimeout:
		return host.UpdateOffer{Err: fmt.Sprintf("the Windows Update search has not answered in %s (started %s)", offerSearchTimeout, r.started.UTC().Format(time.RFC3339))}, nil
	case ok:
		return host.UpdateOffer{Searching: true}, nil
	}
	for rev := range o.runs { // one revision is pending at a time
		delete(o.runs, rev)
	}
	r = &offerRun{started: now, ended: make(chan struct{})}
	o.runs[req.Revision] = r
	go func() {
		offer := searchOffer(m, req)
		o.mu.Lock()
		defer o.mu.Unlock()
		r.done, r.offer = true, offer
		close(r.ended)
	}()
	return host.UpdateOffer{Searching: true}, r.ended
}

// searchOffer searches as the install does and selects as it does.
func searchOffer(m Machine, req host.UpdateRequest) host.UpdateOffer {
	wu, done, err := m.WindowsUpdate()
	if err != nil {
		return host.UpdateOffer{Err: err.Error()}
	}
	defer done()
	offered, err := wu.Search(wuSearch)
	if err != nil {
		return host.UpdateOffer{Err: "searching: " + withThrownCode(err).Error()}
	}
	chosen, err := chooseUpdates(offered, req)
	if err != nil {
		return host.UpdateOffer{Refusal: err.Error()}
	}
	var offer host.UpdateOffer
	for _, i := range chosen {
		offer.Takes = append(offer.Takes, kbOf(offered[i])+": "+offered[i].Title)
	}
	return offer
}

// kbOf is the update's first KB ID as a person writes it (KB5050002).
func kbOf(u decide.WUUpdate) string {
	if len(u.KBs) == 0 {
		return "KB?"
	}
	return "KB" + strings.TrimPrefix(strings.ToUpper(u.KBs[0]), "KB")
}
