package agent

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/names"
)

// preflightEvery is how often a pending revision's preflight is run again
// while the node waits for its turn (a window, a health gate, other nodes
// first): a source that went away since is seen before the cordon. Written
// only when the verdict changes.
const preflightEvery = 10 * time.Minute

// preflightVerdict is the last preflight: for which revision, its value for
// names.AnnPreflight, and when it ran.
type preflightVerdict struct {
	revision, value string
	at              time.Time
	// landed: the Node has carried this verdict (a write that did not land
	// yet is not a verdict lost: it is written again, not judged again).
	landed bool
}

// preflight judges the pool's target revision on this host unless the agent
// is applying it: read-only checks, whose verdict goes into the agent's
// observations (written only when it changes). A node failed and put back
// for a retry is judged again, like one that was never started. A host that
// cannot be read now is judged later.
func (a *agent) preflight(ctx context.Context, node *corev1.Node) {
	pool := node.Labels[names.LabelPool]
	t, ok := a.targets.of(pool)
	working := decide.MayTouch(node.Annotations[names.AnnState], node.Annotations[names.AnnStartedAt])
	if !ok || node.Labels[names.LabelRevision] == t.revision && working {
		// Nothing pending, or the agent is applying it.
		return
	}
	// A verdict the Node no longer carries (the operator clears it when the
	// node fails, so that a retry is judged afresh) is judged again at once.
	onNode := node.Annotations[names.AnnPreflightRevision] == a.pre.revision && node.Annotations[names.AnnPreflight] == a.pre.value
	a.pre.landed = a.pre.landed || onNode
	lost := a.pre.landed && !onNode
	if a.pre.revision == t.revision && !lost && time.Since(a.pre.at) < preflightEvery {
		return
	}
	if !a.obsKnown || a.obsErr != "" {
		return
	}
	cfg := readRevisionConfig(t.data, pool, t.revision)
	var result decide.PreflightResult
	switch cfg.Status {
	case decide.ConfigFound:
		result = a.judge(ctx, t.revision, cfg)
	default:
		result.Blocked = []string{"revision ConfigMap " + names.ConfigMapName(pool, t.revision) + " is unreadable: " + cfg.Problem}
	}
	if v := result.Annotation(); v != a.pre.value || t.revision != a.pre.revision {
		a.log.Info("preflight", "revision", t.revision, "result", v)
	}
	a.pre = preflightVerdict{revision: t.revision, value: result.Annotation(), at: time.Now()}
}

func (a *agent) judge(ctx context.Context, revision string, cfg decide.RevisionConfig) decide.PreflightResult {
	in := decide.PreflightInput{Config: cfg.Config, Observed: a.obs}
	if req, needed, err := decide.PreflightUpdate(revision, cfg.Config, a.obs); err == nil && needed {
		f := a.o.Host.Preflight(ctx, req)
		in.Findings = &f
	}
	return decide.Preflight(in)
}

// preflightObservations are the preflight's annotations (none before the
// first preflight).
func (a *agent) preflightObservations(want map[string]*string) {
	if a.pre.revision == "" {
		return
	}
	want[names.AnnPreflight] = ptr(a.pre.value)
	want[names.AnnPreflightRevision] = ptr(a.pre.revision)
}
