package operation

import "testing"

func op(name, started, since, uid string) *Operation {
	return &Operation{Spec: Spec{NodeName: "win-0", NodeUID: uid, StartedAt: started}, Status: Status{Phase: "Applying", PhaseSince: since}}
}

// The current operation is the node's latest start; of a start retargeted to
// another revision, the one written last; never another host's of the name.
func TestCurrentIsTheLatestStartOfThisHost(t *testing.T) {
	first := op("a", "2026-12-07T10:00:00Z", "2026-12-07T10:01:00Z", "u1")
	retargeted := op("b", "2026-12-07T10:00:00Z", "2026-12-07T10:05:00.5Z", "u1")
	otherHost := op("c", "2026-12-07T11:00:00Z", "2026-12-07T11:00:00Z", "u2")
	for _, order := range [][]*Operation{{first, retargeted, otherHost}, {otherHost, retargeted, first}} {
		if got := Current(order, "win-0", "u1"); got != retargeted {
			t.Errorf("Current = %+v, want the retargeted start's operation", got)
		}
	}
	if got := Current([]*Operation{otherHost}, "win-0", "u1"); got != nil {
		t.Errorf("another host's operation was taken: %+v", got)
	}
}
