package report

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"

	"winpool.dev/agent/internal/names"
)

// reportSchema is the report CRD's schema as the operator generates it
// (crds/, from src/api/report.rs): what the API server holds every write to.
func reportSchema(t *testing.T) *validate.SchemaValidator {
	t.Helper()
	raw, err := os.ReadFile("../../../crds/windowsnodereports.winpool.dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema json.RawMessage `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil || len(crd.Spec.Versions) != 1 {
		t.Fatalf("the report CRD: %v (%d versions)", err, len(crd.Spec.Versions))
	}
	var s spec.Schema
	if err := json.Unmarshal(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, &s); err != nil {
		t.Fatal(err)
	}
	return validate.NewSchemaValidator(&s, nil, "", strfmt.Default)
}

// everyField is a report with every field the agent writes, as it writes them.
func everyField() *Report {
	at := metav1.NewTime(time.Date(2026, 12, 8, 18, 0, 0, 0, time.UTC))
	r := &Report{Status: Status{
		AgentVersion: "0.2.0",
		Apply: &Apply{Revision: "d1fd1f1399", Status: names.StatusFailed, Message: "servicing exited 0x800F0922", StartedAt: at.Format(time.RFC3339),
			Heartbeat: at.Format(time.RFC3339), ResultCode: "0x800F0922", NoReboot: true, HostBuild: "10.0.26100.2894",
			Installed: []InstalledUpdate{{KB: "KB5050002", Title: "2026-12 Cumulative Update", CveIDs: []string{"CVE-2026-21001"}}, {KB: "windows10.0-kb5043936-x64.msu"}}},
		Observed:  &Observed{CNIMode: "overlay", CSIProxyVersion: "1.1.3", RuntimeService: "containerd (NSSM)", CSIProxyHost: "1.1.3"},
		HNS:       &HNS{LoadBalancers: 40, Endpoints: 12, BootID: "b-1", ObservedAt: &at},
		Preflight: &Preflight{Revision: "d1fd1f1399", Verdict: VerdictBlocked, Reasons: []string{"no room"}, Notes: []string{"KB5050002"}, Since: &at},
		HNSRepair: &HNSRepair{BootID: "b-1", At: at, Service: "kubeproxy", Result: RepairRestarted, Message: "restarted"},
		Staging: &Staging{Revision: "d1fd1f1399", Status: StagingStaged, RebootFree: true, Since: &at,
			Items: []StagedItem{{Name: "KB5050002: 2026-12 Cumulative Update", Bytes: 1 << 30, SHA256: strings.Repeat("a", 64), RebootFree: true}}},
		Offer: &Offer{KB: "KB5050002", Title: "2026-12 Cumulative Update (KB5050002)", Published: &at, SearchedAt: at, Error: "searching: 0x80244022",
			PassedOver: []string{"KB5050003: 2026-12 Cumulative Update for .NET Framework 3.5, 4.8 and 4.8.1 (KB5050003)"}},
	}}
	r.APIVersion, r.Kind, r.Name, r.Namespace = Resource.GroupVersion().String(), Kind, "win-0", "winpool-agents"
	return r
}

func validateReport(t *testing.T, v *validate.SchemaValidator, r *Report) []string {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, e := range v.Validate(obj).Errors {
		problems = append(problems, e.Error())
	}
	return problems
}

// What the agent writes is what the operator's CRD takes (the API server
// would refuse anything else, and the agent would retry the write for
// ever); a value the schema does not know is refused here, before the
// integration suite.
func TestTheReportsTheAgentWritesFitTheCRDsSchema(t *testing.T) {
	v := reportSchema(t)
	if problems := validateReport(t, v, everyField()); len(problems) > 0 {
		t.Fatalf("a report the agent writes is refused: %s", strings.Join(problems, "; "))
	}
	for name, breaks := range map[string]func(*Report){
		"an apply status the operator does not know":  func(r *Report) { r.Status.Apply.Status = "Sleeping" },
		"a staging status the operator does not know": func(r *Report) { r.Status.Staging.Status = "Downloading" },
		"an offer's KB that is not one":               func(r *Report) { r.Status.Offer.KB = "KB?" },
		"a repair result the operator does not know":  func(r *Report) { r.Status.HNSRepair.Result = "Rebooted" },
		"an installed update without its KB":          func(r *Report) { r.Status.Apply.Installed[0].KB = "" },
		"more CVE IDs than an update lists":           func(r *Report) { r.Status.Apply.Installed[0].CveIDs = make([]string, 257) },
	} {
		r := everyField()
		breaks(r)
		if problems := validateReport(t, v, r); len(problems) == 0 {
			t.Errorf("%s: taken", name)
		}
	}
}
