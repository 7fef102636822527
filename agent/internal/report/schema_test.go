package report

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"

	"winpool.dev/agent/internal/names"
)

// reportSchema is the report CRD's OpenAPI schema as the operator generates it
// (crds/, from the Rust types), for the validator the API server's own CRD
// validation wraps (kube-openapi's).
func reportSchema(t *testing.T) *validate.SchemaValidator {
	t.Helper()
	raw, err := os.ReadFile("../../../crds/windowsnodereports.winpool.dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema json.RawMessage `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != Resource.Version {
			continue
		}
		var s spec.Schema
		if err := json.Unmarshal(v.Schema.OpenAPIV3Schema, &s); err != nil {
			t.Fatal(err)
		}
		return validate.NewSchemaValidator(&s, nil, "", strfmt.Default)
	}
	t.Fatalf("the report CRD has no version %s", Resource.Version)
	return nil
}

// valid says what the schema finds wrong with r, as the API server would
// refuse it ("" when nothing).
func valid(t *testing.T, v *validate.SchemaValidator, r Report) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	var errs []string
	for _, e := range v.Validate(obj).Errors {
		errs = append(errs, e.Error())
	}
	return strings.Join(errs, "; ")
}

// full is a report with every field the agent writes set, at the bounds.
func full() Report {
	now := metav1.NewTime(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	return Report{
		TypeMeta:   metav1.TypeMeta{APIVersion: Resource.Group + "/" + Resource.Version, Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "win-0"},
		Spec: Spec{
			AgentVersion: "0.9.0",
			Apply: &Apply{Revision: "5d8f2c1a9b", Status: names.StatusFailed, Message: strings.Repeat("m", 2048),
				StartedAt: "2026-12-05T11:00:00Z", Heartbeat: "2026-12-05T11:30:00Z", ResultCode: "0x800F0922"},
			Observed:  &Observed{CNIMode: "overlay", CSIProxyVersion: "1.1.3", RuntimeService: "containerd (nssm)", CSIProxyHost: "csi-proxy (nssm)"},
			HNS:       &HNS{LoadBalancers: 812, Endpoints: 2400, BootID: "b-1"},
			Preflight: &Preflight{Revision: "5d8f2c1a9b", Verdict: VerdictBlocked, Reasons: []string{"a"}, Notes: []string{"n"}, Since: &now},
			HNSRepair: &HNSRepair{BootID: "b-1", At: now, Service: "kubeproxy", Result: RepairRestarted, Message: "restarted"},
		},
	}
}

// Every report the agent writes passes the CRD's schema: every field set,
// every value of each enum the agent has; and the schema refuses what the
// API server must (a value no enum holds, a message over its bound), so a
// Go value the Rust schema does not know fails here, not in a cluster.
func TestReportsTheAgentWritesPassTheCRDsSchema(t *testing.T) {
	v := reportSchema(t)
	if got := valid(t, v, full()); got != "" {
		t.Fatalf("a full report: %s", got)
	}
	for _, s := range []names.ApplyStatus{names.StatusApplying, names.StatusRebooting, names.StatusSucceeded, names.StatusFailed} {
		r := full()
		r.Spec.Apply.Status = s
		if got := valid(t, v, r); got != "" {
			t.Errorf("apply status %s: %s", s, got)
		}
	}
	for _, res := range []RepairResult{RepairRestarted, RepairFailed, RepairUnsupported} {
		r := full()
		r.Spec.HNSRepair.Result = res
		if got := valid(t, v, r); got != "" {
			t.Errorf("repair result %s: %s", res, got)
		}
	}
	for _, verdict := range []string{VerdictReady, VerdictBlocked} {
		r := full()
		r.Spec.Preflight.Verdict = verdict
		if got := valid(t, v, r); got != "" {
			t.Errorf("preflight verdict %s: %s", verdict, got)
		}
	}

	for name, broken := range map[string]func(*Report){
		"an apply status no enum holds": func(r *Report) { r.Spec.Apply.Status = "Exploded" },
		"a repair result no enum holds": func(r *Report) { r.Spec.HNSRepair.Result = "Maybe" },
		"a message over 2048":           func(r *Report) { r.Spec.Apply.Message = strings.Repeat("m", 2049) },
		"a negative count":              func(r *Report) { r.Spec.HNS.LoadBalancers = -1 },
	} {
		r := full()
		broken(&r)
		if got := valid(t, v, r); got == "" {
			t.Errorf("%s: passed the schema", name)
		}
	}
}
