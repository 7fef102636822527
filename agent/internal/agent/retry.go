package agent

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// backoff is capped exponential backoff with jitter: each delay is drawn from
// [d/2, d] where d doubles from initial up to max, so thousands of agents that
// lost the API at the same moment do not come back in lockstep.
type backoff struct {
	initial, max, cur time.Duration
}

func newBackoff(initial, max time.Duration) *backoff { return &backoff{initial: initial, max: max} }

func (b *backoff) next() time.Duration {
	switch {
	case b.cur == 0:
		b.cur = b.initial
	case b.cur < b.max:
		b.cur = min(2*b.cur, b.max)
	}
	half := b.cur / 2
	return half + rand.N(half+1)
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// permanentError ends a retry: trying again cannot change the answer.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

func permanent(err error) error { return permanentError{err} }

// retry calls fn until it succeeds, returns a permanent error (given back
// unwrapped) or ctx ends (ctx's error).
func (a *agent) retry(ctx context.Context, call string, fn func(context.Context) error) error {
	b := newBackoff(a.t.retryInitial, a.t.retryMax)
	for {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		var p permanentError
		if errors.As(err, &p) {
			return p.err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d := b.next()
		a.log.Warn("API call failed; retrying", "call", call, "in", d.Round(time.Millisecond).String(), "err", err)
		if !sleep(ctx, d) {
			return ctx.Err()
		}
	}
}
