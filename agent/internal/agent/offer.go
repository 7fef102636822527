package agent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"winpool.dev/agent/internal/names"
	"winpool.dev/agent/internal/report"
)

// PatchCheckEnv is the variable the operator's DaemonSet sets, from
// os.patchPolicy.checkInterval, for a pool whose patch level follows its
// update source: how often the agent searches it (a Go duration).
const PatchCheckEnv = "WINPOOL_PATCH_CHECK_INTERVAL"

// minPatchCheck bounds how often an agent scans its update source: every
// node of a pool scans the same WSUS.
const minPatchCheck = 10 * time.Second

// ParsePatchCheck reads PatchCheckEnv: unset is no search (0).
func ParsePatchCheck(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q is not a positive Go duration", PatchCheckEnv, v)
	}
	return max(d, minPatchCheck), nil
}

// checkOffer keeps, for a pool whose patch level follows its update source
// (PatchCheckEnv), the newest cumulative update the source offers this
// node, as the host's last search found it; the report carries it (written
// only when it changed: a search every interval costs a write only when its
// answer, or its time, moved). A node in no pool drops it. While the node
// is being worked on no search starts: the install has Windows Update to
// itself, and the last answer stands.
func (a *agent) checkOffer(ctx context.Context, node *corev1.Node) {
	if a.o.PatchCheckEvery <= 0 || node.Labels[names.LabelPool] == "" {
		a.offer = nil
		return
	}
	if a.working(node) {
		return
	}
	found := a.o.Host.NewestOffer(ctx, a.o.PatchCheckEvery)
	if found.SearchedAt.IsZero() {
		return
	}
	o := &report.Offer{KB: found.KB, Title: oneLine(found.Title), SearchedAt: metav1.NewTime(found.SearchedAt.UTC().Truncate(1e9)), Error: oneLine(found.Err)}
	for _, p := range found.PassedOver[:min(len(found.PassedOver), report.MaxPassedOver)] {
		o.PassedOver = append(o.PassedOver, oneLine(p))
	}
	if !found.Published.IsZero() {
		o.Published = &metav1.Time{Time: found.Published.UTC().Truncate(1e9)}
	}
	a.offer = o
}
