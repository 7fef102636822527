package agent

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
	"winpool.dev/agent/internal/report"
)

// Staging downloads the pending revision's update once its preflight
// passed, while the node still serves, so its drain lasts the install and
// the reboot only; the operator starts only a staged node when the pool
// stages (rollout.staging). A failed staging is reported (the operator
// holds the node, naming it) and tried again: first after the transient
// wait (a busy WSUS, a reset download), then every preflightEvery.

// StagingEnv is the variable the operator's DaemonSet sets from the pool's
// rollout.staging.
const StagingEnv = "WINPOOL_STAGING"

// StagingBandwidthEnv is the variable the operator's DaemonSet sets from
// the pool's rollout.stagingBandwidth: bytes a second.
const StagingBandwidthEnv = "WINPOOL_STAGING_BANDWIDTH"

// DefaultStagingBandwidth paces a staging's package downloads when the pool
// sets no rollout.stagingBandwidth: 20 MiB/s (168 Mbit/s), a 1.2 GB
// cumulative update in a minute, off the critical path. Windows Update's
// downloads are paced by BITS instead (background priority: only what
// nothing else uses).
const DefaultStagingBandwidth = 20 << 20

// ParseStagingBandwidth reads StagingBandwidthEnv: unset is the default.
func ParseStagingBandwidth(v string) (int64, error) {
	if v == "" {
		return DefaultStagingBandwidth, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q is not a positive number of bytes a second", StagingBandwidthEnv, v)
	}
	return n, nil
}

// ParseStaging reads StagingEnv: Enabled (or unset: the default) or
// Disabled.
func ParseStaging(v string) (bool, error) {
	switch v {
	case "", "Enabled":
		return true, nil
	case "Disabled":
		return false, nil
	}
	return false, fmt.Errorf("%s=%q is neither Enabled nor Disabled", StagingEnv, v)
}

// stagingState is the staging of the revision the preflight cleared.
type stagingState struct {
	s     host.Staging
	since time.Time
	// failures in a row; next: when a failed staging is asked again.
	failures int
	next     time.Time
}

// stage asks the host to stage the revision the preflight last cleared,
// until the operator starts the node with it (from then on the install
// downloads what it still needs) or while the node is being worked on.
func (a *agent) stage(ctx context.Context, node *corev1.Node) {
	if !a.o.Stage || a.pre.revision == "" || !a.pre.result.Ready() || node.Labels[names.LabelRevision] == a.pre.revision {
		return
	}
	if a.working(node) {
		return
	}
	rev, cur := a.pre.revision, &a.staging
	if cur.s.Revision == rev && cur.s.Phase == host.StageDone {
		return
	}
	now := time.Now()
	if cur.s.Revision == rev && cur.s.Phase == host.StageFailed && now.Before(cur.next) {
		return
	}
	s := host.Staging{Revision: rev, Phase: host.StageDone}
	if a.pre.update != nil {
		req := *a.pre.update
		req.Bandwidth = a.o.StageBandwidth
		s = a.o.Host.Stage(ctx, req)
	}
	a.tookStaging(s, now)
}

// tookStaging keeps what the host said, and when to ask it again.
func (a *agent) tookStaging(s host.Staging, now time.Time) {
	cur := &a.staging
	changed := s.Revision != cur.s.Revision || s.Phase != cur.s.Phase
	if changed {
		a.log.Info("staging", "revision", s.Revision, "phase", s.Phase, "items", len(s.Items), "err", s.Err)
		cur.since = now
	}
	if s.Revision != cur.s.Revision {
		cur.failures = 0
	}
	switch s.Phase {
	case host.StageRunning:
		a.stageDone = s.Done
		if s.Done == nil {
			a.stageDue = time.After(a.t.recheck)
		}
	case host.StageFailed:
		if changed {
			cur.failures++
		}
		wait := preflightEvery
		if cur.failures == 1 {
			wait = a.transientRetry()
		}
		if changed {
			cur.next = now.Add(wait)
			a.stageDue = time.After(wait)
		}
	}
	cur.s = s
}

// transientRetry is the agent's wait after a first transient failure.
func (a *agent) transientRetry() time.Duration {
	if a.o.TransientRetryAfter > 0 {
		return a.o.TransientRetryAfter
	}
	return decide.TransientRetryAfter
}

// resumeStaging takes a Staged revision from the report a run of the agent
// before this one wrote (after a reboot, a pod restart): its download is not
// searched for and checked again (a search is a scan on WSUS). Should its
// content be gone since, the install downloads it. Anything else is staged
// anew.
func (a *agent) resumeStaging(s *report.Staging) {
	if s == nil || s.Status != report.StagingStaged || s.Revision == "" {
		return
	}
	st := host.Staging{Revision: s.Revision, Phase: host.StageDone}
	for _, it := range s.Items {
		st.Items = append(st.Items, host.StagedItem{Name: it.Name, Bytes: it.Bytes, SHA256: it.SHA256, RebootFree: it.RebootFree})
	}
	a.staging = stagingState{s: st, since: time.Now()}
	if s.Since != nil {
		a.staging.since = s.Since.Time
	}
}

// stagingReport is the report's staging (nil before the first).
func (a *agent) stagingReport() *report.Staging {
	s := a.staging.s
	if s.Revision == "" {
		return nil
	}
	out := &report.Staging{Revision: s.Revision, Since: &metav1.Time{Time: a.staging.since.UTC().Truncate(time.Second)}, RebootFree: s.RebootFree()}
	switch s.Phase {
	case host.StageRunning:
		out.Status = report.StagingRunning
	case host.StageDone:
		out.Status = report.StagingStaged
	default:
		out.Status, out.Message = report.StagingFailed, oneLine(s.Err)
	}
	for i, it := range s.Items {
		if i == maxListed {
			break
		}
		out.Items = append(out.Items, report.StagedItem{Name: oneLine(it.Name), Bytes: it.Bytes, SHA256: it.SHA256, RebootFree: it.RebootFree})
	}
	return out
}
