package agent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"winpool.dev/agent/internal/names"
)

func nodeAt(rv string, anns map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, ResourceVersion: rv, Annotations: anns}}
}

// After its own write the agent must not decide from an older watched Node:
// it would read its Applying report as missing and reset the host's counters.
func TestViewPrefersTheAgentsWriteUntilTheWatchCatchesUp(t *testing.T) {
	applying := map[string]string{names.AnnAppliedRevision: "r1", names.AnnApplyStatus: "Applying"}
	cases := []struct {
		name      string
		written   *corev1.Node
		later     *corev1.Node
		wantLater bool
	}{
		{"older resource version", nodeAt("100", applying), nodeAt("99", nil), false},
		{"same resource version", nodeAt("100", applying), nodeAt("100", applying), true},
		{"newer resource version, whatever it says", nodeAt("100", applying), nodeAt("101", nil), true},
		{"no resource versions, write not seen yet", nodeAt("", applying), nodeAt("", nil), false},
		{"no resource versions, write seen", nodeAt("", applying), nodeAt("", applying), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var v nodeView
			v.setWatched(nodeAt("98", nil))
			v.setWritten(c.written, map[string]*string{names.AnnAppliedRevision: strp("r1"), names.AnnApplyStatus: strp("Applying")})
			if v.current() != c.written {
				t.Fatal("the write's response is not the view right after the write")
			}
			v.setWatched(c.later)
			if got := v.current() == c.later; got != c.wantLater {
				t.Errorf("view is the watched Node: %v, want %v", got, c.wantLater)
			}
		})
	}
}

func TestViewOfADeletedNodeIsEmpty(t *testing.T) {
	var v nodeView
	v.setWritten(nodeAt("100", nil), nil)
	v.setWatched(nil)
	if v.current() != nil {
		t.Error("a deleted Node is still in the view")
	}
}

// A deleted key counts as written only once the watched Node lacks it.
func TestViewDeletedKeyCatchUp(t *testing.T) {
	var v nodeView
	written := nodeAt("", nil)
	v.setWritten(written, map[string]*string{names.AnnCSIProxyVersion: nil})
	v.setWatched(nodeAt("", map[string]string{names.AnnCSIProxyVersion: "v1.1.2"}))
	if v.current() != written {
		t.Error("a watched Node that still has the deleted key replaced the write")
	}
	v.setWatched(nodeAt("", map[string]string{}))
	if v.current() == written {
		t.Error("a watched Node without the deleted key did not replace the write")
	}
}
