package operation

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// An operation is the only authority the agent acts on, decoded from
// whatever the API server stores: what decodes must convert back to itself
// (no field read half), and Current must pick the latest start of this host
// whatever the order of the list and however the times are spelled.
func FuzzCurrent(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"winpool.dev/v1alpha1","kind":"WindowsNodeOperation","metadata":{"name":"win-0-r1"},
		"spec":{"nodeName":"win-0","nodeUid":"u1","pool":"win22","poolGeneration":3,"revision":"r1","action":"Update",
		"startedAt":"2026-12-07T10:00:00Z","installBudget":"2h","undoGate":"Verifying"},
		"status":{"phase":"Applying","phaseSince":"2026-12-07T10:01:00.5+01:00","drainedAt":"2026-12-07T10:00:30Z"}}`),
		"2026-12-07T10:00:00Z", "2026-12-07T09:01:00.5Z")
	f.Add([]byte(`{"spec":{"nodeName":"win-0","nodeUid":"u1","poolGeneration":"3"}}`), "2026-12-07T11:00:00+01:00", "")
	f.Fuzz(func(t *testing.T, data []byte, started, since string) {
		// The dynamic client decodes numbers as int64 where they fit, as this does.
		var obj map[string]any
		if utiljson.Unmarshal(data, &obj) != nil || obj == nil {
			return
		}
		a, err := FromUnstructured(&unstructured.Unstructured{Object: obj})
		if err != nil {
			return
		}
		back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := FromUnstructured(&unstructured.Unstructured{Object: back}); err != nil || !reflect.DeepEqual(a, again) {
			t.Fatalf("%+v converts back as %+v (%v)", a, again, err)
		}
		b := &Operation{Spec: Spec{NodeName: "win-0", NodeUID: "u1", StartedAt: started}, Status: Status{PhaseSince: since}}
		cur, other := Current([]*Operation{a, b}, "win-0", "u1"), Current([]*Operation{b, a}, "win-0", "u1")
		for _, o := range []*Operation{a, b} {
			at, err := time.Parse(time.RFC3339Nano, o.Spec.StartedAt)
			if err != nil || o.Spec.NodeName != "win-0" || o.Spec.NodeUID != "u1" {
				if cur == o {
					t.Fatalf("Current took %+v, not a start of this host", o)
				}
				continue
			}
			if cur == nil || cur != other && !tied(cur, other) {
				t.Fatalf("of %+v and %+v, Current took %+v in one order and %+v in the other", a, b, cur, other)
			}
			if curAt, _ := time.Parse(time.RFC3339Nano, cur.Spec.StartedAt); at.After(curAt) {
				t.Fatalf("Current took %+v over the later start %+v", cur, o)
			}
		}
	})
}

// tied: two operations of one start written at one time; either is current.
func tied(a, b *Operation) bool {
	atA, _ := time.Parse(time.RFC3339Nano, a.Spec.StartedAt)
	atB, _ := time.Parse(time.RFC3339Nano, b.Spec.StartedAt)
	sinceA, _ := time.Parse(time.RFC3339Nano, a.Status.PhaseSince)
	sinceB, _ := time.Parse(time.RFC3339Nano, b.Status.PhaseSince)
	return atA.Equal(atB) && sinceA.Equal(sinceB)
}
