package report

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"winpool.dev/agent/internal/names"
)

// The operator defines the report (src/api/report.rs); src/contract.rs writes
// testdata/rust-report.json from its types and reads testdata/go-report.json,
// which this package writes. WINPOOL_UPDATE_GOLDEN=1 rewrites the Go side's.

// sameJSON: a and b hold the same JSON value (key order aside).
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func TestTheOperatorsReportReadsWhole(t *testing.T) {
	data, err := os.ReadFile("testdata/rust-report.json")
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("the operator's report does not read: %v", err)
	}
	s := r.Status
	if s.Apply == nil || s.Apply.Status != names.StatusRebooting || s.Apply.StartedAt == "" || s.Apply.Heartbeat == "" ||
		s.HNS == nil || s.HNS.BootID == "" || s.HNS.ObservedAt == nil || s.Preflight == nil || s.Preflight.Verdict != VerdictBlocked ||
		s.Observed == nil || s.Observed.CSIProxyHost == "" || len(r.OwnerReferences) != 1 || len(s.Apply.Installed) == 0 {
		t.Errorf("fields lost: %+v", r)
	}
	// A field the operator defines and the agent drops would be lost at its
	// next write (it replaces the whole status).
	again, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, data, again) {
		t.Errorf("the agent's types do not keep every field of the operator's report:\n%s\nwant\n%s", again, data)
	}
}

func TestTheGoldenIsWhatTheAgentWrites(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	r := Report{
		TypeMeta: metav1.TypeMeta{APIVersion: Resource.GroupVersion().String(), Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "win-0", Namespace: "winpool-agents", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: "win-0", UID: "8c7d1f0e-0000-4000-8000-000000000001",
		}}},
		Status: Status{
			AgentVersion: "v0.3.0",
			Apply: &Apply{Revision: "5d8f2c1a9b", Status: names.StatusSucceeded,
				Message:   "revision 5d8f2c1a9b applied: build 10.0.20348.2762, containerd 1.7.22, cni overlay, csi-proxy 1.1.3",
				StartedAt: "2026-12-02T10:40:00Z", Heartbeat: "2026-12-02T11:05:00Z",
				Installed: []InstalledUpdate{{KB: "KB5050002", Title: "2026-12 Cumulative Update for Microsoft server operating system version 21H2 for x64-based Systems (KB5050002)",
					CveIDs: []string{"CVE-2026-21001", "CVE-2026-21002"}}}},
			Observed:  &Observed{CNIMode: "overlay", CSIProxyVersion: "1.1.3", RuntimeService: "containerd"},
			HNS:       &HNS{LoadBalancers: 1200, Endpoints: 4800, BootID: "0b5e7a52-3c2f-4a8f-9d1e-5f6a7b8c9d0e", ObservedAt: &since},
			Preflight: &Preflight{Revision: "5d8f2c1a9b", Verdict: VerdictReady, Notes: []string{"a reboot is pending (Component Based Servicing)"}, Since: &since},
		},
	}
	got, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	const file = "testdata/go-report.json"
	if os.Getenv("WINPOOL_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is not what the agent writes (WINPOOL_UPDATE_GOLDEN=1 rewrites it):\n%s", file, got)
	}
}
