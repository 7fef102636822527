package agent

import (
	"context"
	"errors"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// newBackoff is capped exponential backoff with jitter: each delay is drawn
// from [d, 1.5d] where d doubles from initial up to max, so thousands of
// agents that lost the API at the same moment do not come back in lockstep.
func newBackoff(initial, max time.Duration) *wait.Backoff {
	return &wait.Backoff{Duration: initial, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: max}
}

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
		d := b.Step()
		a.log.Warn("API call failed; retrying", "call", call, "in", d.Round(time.Millisecond).String(), "err", err)
		if !sleep(ctx, d) {
			return ctx.Err()
		}
	}
}
