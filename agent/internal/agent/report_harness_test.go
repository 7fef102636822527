package agent

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"winpool.dev/agent/internal/names"
	"winpool.dev/agent/internal/operation"
	"winpool.dev/agent/internal/report"
)

// Keys of the report's values as tests read them (values): one string per
// field, so a test states a whole report, or the changes of one write, as a
// map.
const (
	keyAppliedRevision   = "apply.revision"
	keyApplyStatus       = "apply.status"
	keyApplyMessage      = "apply.message"
	keyApplyStartedAt    = "apply.startedAt"
	keyAgentVersion      = "agentVersion"
	keyCNIMode           = "observed.cniMode"
	keyCSIProxyVersion   = "observed.csiProxyVersion"
	keyRuntimeService    = "observed.runtimeService"
	keyCSIProxyHost      = "observed.csiProxyHost"
	keyHNSLoadBalancers  = "hns.loadBalancers"
	keyHNSEndpoints      = "hns.endpoints"
	keyHNSBootID         = "hns.bootID"
	keyPreflight         = "preflight"
	keyPreflightRevision = "preflight.revision"
)

func newReportClient() *dynamicfake.FakeDynamicClient {
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{report.Resource: "WindowsNodeReportList", operation.Resource: "WindowsNodeOperationList"})
	// As the API server does for a resource with a status subresource: a
	// create keeps no status (the agent must write it through /status).
	c.PrependReactor("create", report.Resource.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		if u, ok := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured); ok {
			unstructured.RemoveNestedField(u.Object, "status")
		}
		return false, nil, nil
	})
	return c
}

// values is a report status as flat strings ("" fields absent).
func values(s report.Status) map[string]string {
	out := map[string]string{}
	set := func(k, v string) {
		if v != "" {
			out[k] = v
		}
	}
	set(keyAgentVersion, s.AgentVersion)
	if a := s.Apply; a != nil {
		set(keyAppliedRevision, a.Revision)
		set(keyApplyStatus, string(a.Status))
		set(keyApplyMessage, a.Message)
		set(keyApplyStartedAt, a.StartedAt)
	}
	if o := s.Observed; o != nil {
		set(keyCNIMode, o.CNIMode)
		set(keyCSIProxyVersion, o.CSIProxyVersion)
		set(keyRuntimeService, o.RuntimeService)
		set(keyCSIProxyHost, o.CSIProxyHost)
	}
	if h := s.HNS; h != nil {
		set(keyHNSLoadBalancers, strconv.FormatInt(h.LoadBalancers, 10))
		set(keyHNSEndpoints, strconv.FormatInt(h.Endpoints, 10))
		set(keyHNSBootID, h.BootID)
	}
	if p := s.Preflight; p != nil {
		set(keyPreflightRevision, p.Revision)
		v := p.Verdict
		if len(p.Reasons) > 0 {
			v += ": " + strings.Join(p.Reasons, "; ")
		}
		set(keyPreflight, v)
	}
	return out
}

// specOf is the report whose values are v (the inverse of values, for the
// fields a test seeds).
func specOf(v map[string]string) report.Status {
	var s report.Status
	s.AgentVersion = v[keyAgentVersion]
	if v[keyApplyStatus] != "" {
		s.Apply = &report.Apply{Revision: v[keyAppliedRevision], Status: names.ApplyStatus(v[keyApplyStatus]), Message: v[keyApplyMessage], StartedAt: v[keyApplyStartedAt]}
	}
	o := report.Observed{CNIMode: v[keyCNIMode], CSIProxyVersion: v[keyCSIProxyVersion], RuntimeService: v[keyRuntimeService], CSIProxyHost: v[keyCSIProxyHost]}
	if o != (report.Observed{}) {
		s.Observed = &o
	}
	if v[keyHNSLoadBalancers] != "" {
		lb, _ := strconv.ParseInt(v[keyHNSLoadBalancers], 10, 64)
		ep, _ := strconv.ParseInt(v[keyHNSEndpoints], 10, 64)
		s.HNS = &report.HNS{LoadBalancers: lb, Endpoints: ep, BootID: v[keyHNSBootID]}
	}
	return s
}

// seedReport stores the report an earlier run of the agent wrote.
func (h *harness) seedReport(v map[string]string) {
	h.t.Helper()
	h.seedReportSpec(specOf(v))
	h.seeded = v
}

// seedReportSpec stores status as the report an earlier run of the agent wrote.
func (h *harness) seedReportSpec(status report.Status) {
	h.t.Helper()
	h.seedReportObject(&report.Report{Status: status})
	h.seeded = values(status)
}

func (h *harness) seedReportObject(r *report.Report) {
	h.t.Helper()
	r.Name, r.Namespace = testNode, testNamespace
	r.APIVersion, r.Kind = report.Resource.GroupVersion().String(), report.Kind
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.dyn.Tracker().Create(report.Resource, &unstructured.Unstructured{Object: obj}, testNamespace); err != nil {
		h.t.Fatal(err)
	}
}

// storedReport is the agent's report as the API holds it (nil: none).
func (h *harness) storedReport() *report.Report {
	h.t.Helper()
	obj, err := h.dyn.Tracker().Get(report.Resource, testNamespace, testNode)
	if err != nil {
		return nil
	}
	var r report.Report
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, &r); err != nil {
		h.t.Fatal(err)
	}
	return &r
}

// reported is the stored report's values (empty: none).
func (h *harness) reported() map[string]string {
	if r := h.storedReport(); r != nil {
		return values(r.Status)
	}
	return map[string]string{}
}

func (h *harness) value(key string) string { return h.reported()[key] }

// deleteReport deletes the report, as a person might.
func (h *harness) deleteReport() {
	h.t.Helper()
	if err := h.dyn.Tracker().Delete(report.Resource, testNamespace, testNode); err != nil {
		h.t.Fatal(err)
	}
}

// reportWrites are the statuses the agent's report writes set, in order.
func (h *harness) reportWrites() []report.Status {
	h.t.Helper()
	var out []report.Status
	for _, a := range h.dyn.Actions() {
		if s, ok := writtenSpec(h, a); ok {
			out = append(out, s)
		}
	}
	return out
}

// writtenSpec is the status a report write sets: a patch of the status
// subresource. A create sets none (the API server keeps no status from it).
func writtenSpec(h *harness, a k8stesting.Action) (report.Status, bool) {
	p, ok := a.(k8stesting.PatchActionImpl)
	if !ok {
		return report.Status{}, false
	}
	var ops []struct {
		Op    string        `json:"op"`
		Path  string        `json:"path"`
		Value report.Status `json:"value"`
	}
	if err := json.Unmarshal(p.GetPatch(), &ops); err != nil || len(ops) != 1 {
		h.t.Fatalf("the report patch %s is not one operation (%v)", p.GetPatch(), err)
	}
	if p.GetSubresource() != "status" || ops[0].Op != "add" || ops[0].Path != "/status" {
		h.t.Fatalf("the report patch %s (subresource %q) is not a status write", p.GetPatch(), p.GetSubresource())
	}
	return ops[0].Value, true
}

// reportChanges are the changes each report write made, as values (nil:
// the field went away), from the report seeded before the agent ran.
func (h *harness) reportChanges() []map[string]*string {
	h.t.Helper()
	before := maps.Clone(h.seeded)
	var out []map[string]*string
	for _, s := range h.reportWrites() {
		after := values(s)
		changes := map[string]*string{}
		for k, v := range after {
			if before[k] != v {
				changes[k] = strp(v)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				changes[k] = nil
			}
		}
		out = append(out, changes)
		before = after
	}
	return out
}

// reportsWritten lists the apply results the agent wrote, in order, as
// "<status>: <message>" (a write that changed neither is not one).
func (h *harness) reportsWritten() []string {
	var out []string
	last := ""
	for _, s := range h.reportWrites() {
		v := values(s)
		r := v[keyApplyStatus] + ": " + v[keyApplyMessage]
		if v[keyApplyStatus] == "" || r == last {
			continue
		}
		out, last = append(out, r), r
	}
	return out
}

// watchApplyStatus records every apply status the stored report takes from
// now on (as a watch sees them); the returned func lists them so far.
func (h *harness) watchApplyStatus() func() []string {
	h.t.Helper()
	w, err := h.dyn.Tracker().Watch(report.Resource, testNamespace)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []string
	go func() {
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				var r report.Report
				if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r) == nil {
					mu.Lock()
					seen = append(seen, values(r.Status)[keyApplyStatus])
					mu.Unlock()
				}
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// assertOnlyAgentWrites checks every write the agent made: its own
// report, under its field manager, and Events about its Node; no Node write
// at all.
func (h *harness) assertOnlyAgentWrites() {
	h.t.Helper()
	for _, a := range h.client.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
		case "create":
			h.assertEvent(a)
		default:
			h.t.Errorf("the agent did %s %s/%s", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
		}
	}
	for _, a := range h.dyn.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		case "create", "patch":
		default:
			h.t.Errorf("the agent did %s %s", a.GetVerb(), a.GetResource().Resource)
			continue
		}
		if a.GetResource() != report.Resource || a.GetNamespace() != testNamespace {
			h.t.Errorf("the agent wrote %s in %q", a.GetResource(), a.GetNamespace())
		}
		switch a := a.(type) {
		case k8stesting.PatchActionImpl:
			if a.GetName() != testNode || a.PatchOptions.FieldManager != names.FieldManager {
				h.t.Errorf("the agent patched report %s as %q", a.GetName(), a.PatchOptions.FieldManager)
			}
		case k8stesting.CreateActionImpl:
			u := a.GetObject().(*unstructured.Unstructured)
			owners := u.GetOwnerReferences()
			if u.GetName() != testNode || a.CreateOptions.FieldManager != names.FieldManager || len(owners) != 1 || owners[0].Kind != "Node" || owners[0].Name != testNode {
				h.t.Errorf("the agent created report %s as %q, owned by %v", u.GetName(), a.CreateOptions.FieldManager, owners)
			}
		}
	}
}
