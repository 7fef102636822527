// Package gitops checks how the GitOps tools winpool documents judge a
// WindowsNodePool: kstatus (Flux's health checks and `wait: true`, cli-utils
// appliers) and the Argo CD health check in docs/gitops/argocd-health.lua,
// run under gopher-lua the way Argo CD runs it. The pools are the JSON
// objects in testdata/pools, written by the operator's own status code
// (`cargo test --lib status::gitops`, which hack/test.sh runs first); the
// verdicts are the table below. See docs/gitops.md.
package gitops

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	luajson "layeh.com/gopher-json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"
)

const (
	repoRoot    = "../.."
	healthLua   = repoRoot + "/docs/gitops/argocd-health.lua"
	healthKey   = "resource.customizations.health.winpool.dev_WindowsNodePool"
	poolsGlob   = "testdata/pools/*.json"
	argoInvalid = "Lua returned an invalid health status"
)

// expectation is what each tool must make of one fixture. It is written from
// the contract in docs/gitops.md, not from running either tool: a change in a
// verdict must be a change to this table, made on purpose.
type expectation struct {
	kstatus status.Status
	argo    string
	// The Argo CD message: the message of this condition ...
	argoMessageOf string
	// ... or exactly this text.
	argoMessage string
}

var expected = map[string]expectation{
	"complete": {kstatus: status.CurrentStatus, argo: "Healthy", argoMessageOf: "Ready"},
	"updating": {kstatus: status.InProgressStatus, argo: "Progressing", argoMessageOf: "Reconciling"},
	// Waiting weeks for the next window with nothing failed is Ready: a Flux
	// `wait: true` must return, not time out every month.
	"outside-window":       {kstatus: status.CurrentStatus, argo: "Healthy", argoMessageOf: "Ready"},
	"paused":               {kstatus: status.InProgressStatus, argo: "Suspended", argoMessageOf: "Paused"},
	"paused-by-annotation": {kstatus: status.InProgressStatus, argo: "Suspended", argoMessageOf: "Paused"},
	// Stalled wins over Paused: the pool paused itself and needs a person.
	"failure-limit":          {kstatus: status.FailedStatus, argo: "Degraded", argoMessageOf: "Stalled"},
	"failed-within-budget":   {kstatus: status.InProgressStatus, argo: "Progressing", argoMessageOf: "Reconciling"},
	"finished-with-failures": {kstatus: status.FailedStatus, argo: "Degraded", argoMessageOf: "Stalled"},
	"health-gate-closed":     {kstatus: status.InProgressStatus, argo: "Progressing", argoMessageOf: "Reconciling"},
	// rollout.hnsPacing: the nodes' HNS is behind; the rollout goes on by itself.
	"waiting-for-hns":   {kstatus: status.InProgressStatus, argo: "Progressing", argoMessageOf: "Reconciling"},
	"preflight-blocked": {kstatus: status.FailedStatus, argo: "Degraded", argoMessageOf: "Stalled"},
	"invalid-window":    {kstatus: status.FailedStatus, argo: "Degraded", argoMessageOf: "Stalled"},
	"no-nodes":          {kstatus: status.InProgressStatus, argo: "Progressing", argoMessageOf: "Ready"},
	"generation-not-observed": {kstatus: status.InProgressStatus, argo: "Progressing",
		argoMessage: "Waiting for winpool to observe generation 4"},
	// kstatus' own rule: an object without any condition it knows is Current
	// (it cannot tell "not looked at yet" from "has no conditions").
	"no-status": {kstatus: status.CurrentStatus, argo: "Progressing",
		argoMessage: "Waiting for winpool to report the pool's status"},
	// Argo CD never asks the script about an object being deleted: it reports
	// Progressing "Pending deletion" itself (gitops-engine health.GetResourceHealth).
	// The script, asked anyway, judges the status as it stands.
	"deleting": {kstatus: status.TerminatingStatus, argo: "Healthy", argoMessageOf: "Ready"},
}

// loadPools decodes the fixtures the way client-go's dynamic client (Flux) and
// Argo CD's cluster cache hold objects: integers as int64, which is what
// kstatus' NestedInt64 look-ups of generation and observedGeneration need.
func loadPools(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	paths, err := filepath.Glob(poolsGlob)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no fixtures match %s: `cargo test --lib status::gitops` writes them", poolsGlob)
	}
	pools := map[string]*unstructured.Unstructured{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		if u.GetAPIVersion() != "winpool.dev/v1alpha1" || u.GetKind() != "WindowsNodePool" || u.GetName() != name {
			t.Fatalf("%s: want a winpool.dev/v1alpha1 WindowsNodePool named %q, got %s %s %q", p, name, u.GetAPIVersion(), u.GetKind(), u.GetName())
		}
		pools[name] = u
	}
	return pools
}

// A fixture nobody judged is a state nobody decided on; an expectation
// without its fixture is a state that silently stopped being tested.
func TestEveryFixtureHasAnExpectation(t *testing.T) {
	pools := loadPools(t)
	for _, name := range slices.Sorted(maps.Keys(pools)) {
		if _, ok := expected[name]; !ok {
			t.Errorf("testdata/pools/%s.json has no entry in the expected table", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(expected)) {
		if _, ok := pools[name]; !ok {
			t.Errorf("the expected table has %q, but there is no testdata/pools/%s.json", name, name)
		}
	}
}

// eachPool runs judge as a subtest for every fixture with an expectation
// (TestEveryFixtureHasAnExpectation reports the others).
func eachPool(t *testing.T, judge func(t *testing.T, pool *unstructured.Unstructured, want expectation)) {
	pools := loadPools(t)
	for _, name := range slices.Sorted(maps.Keys(pools)) {
		if want, ok := expected[name]; ok {
			t.Run(name, func(t *testing.T) { judge(t, pools[name], want) })
		}
	}
}

func TestKstatus(t *testing.T) {
	eachPool(t, func(t *testing.T, pool *unstructured.Unstructured, want expectation) {
		res, err := status.Compute(pool)
		if err != nil {
			t.Fatalf("status.Compute: %v", err)
		}
		if res.Status != want.kstatus {
			t.Errorf("kstatus: got %s (%q), want %s", res.Status, res.Message, want.kstatus)
		}
	})
}

func TestArgoCDHealth(t *testing.T) {
	script := readFile(t, healthLua)
	eachPool(t, func(t *testing.T, pool *unstructured.Unstructured, want expectation) {
		wantMessage := want.argoMessage
		if want.argoMessageOf != "" {
			wantMessage = conditionMessage(t, pool, want.argoMessageOf)
		}
		// Argo CD opens every library only when argocd-cm sets
		// resource.customizations.useOpenLibs.winpool.dev_WindowsNodePool;
		// the check must not depend on it either way.
		for _, openLibs := range []bool{false, true} {
			got, err := argoHealth(script, pool, openLibs)
			if err != nil {
				t.Fatalf("useOpenLibs=%v: %v", openLibs, err)
			}
			if got.Status != want.argo || got.Message != wantMessage {
				t.Errorf("useOpenLibs=%v: got %s %q, want %s %q", openLibs, got.Status, got.Message, want.argo, wantMessage)
			}
		}
	})
}

// The harness must be no kinder than Argo CD, or a check that passes here
// fails in a cluster.
func TestHarnessIsArgoCD(t *testing.T) {
	pool := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"generation": int64(3)}}}
	for _, c := range []struct {
		script   string
		openLibs bool
		want     healthStatus
		fails    bool
	}{
		// No string library unless useOpenLibs is set.
		{script: `return {status = string.format("%s", "Healthy")}`, fails: true},
		{script: `return {status = string.format("%s", "Healthy")}`, openLibs: true, want: healthStatus{Status: "Healthy"}},
		// An int64 from the API server arrives as a Lua number.
		{script: `return {status = "Healthy", message = "generation " .. obj.metadata.generation}`, want: healthStatus{Status: "Healthy", Message: "generation 3"}},
		{script: `return {status = "Fine"}`, want: healthStatus{Status: "Unknown", Message: argoInvalid}},
		{script: `return nil`, want: healthStatus{}},
		{script: `return "Healthy"`, fails: true},
		{script: `while true do end`, fails: true},
	} {
		got, err := argoHealth(c.script, pool, c.openLibs)
		if c.fails {
			if err == nil {
				t.Errorf("%s (useOpenLibs=%v): got %+v, want an error", c.script, c.openLibs, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s (useOpenLibs=%v): got %+v, %v, want %+v", c.script, c.openLibs, got, err, c.want)
		}
	}
}

// The argocd-cm snippets people copy must be the script this test runs.
func TestEmbeddedHealthChecksMatch(t *testing.T) {
	script := readFile(t, healthLua)
	for _, doc := range []string{"docs/gitops.md", "charts/winpool/README.md"} {
		t.Run(doc, func(t *testing.T) {
			found := 0
			for i, block := range fencedBlocks(readFile(t, filepath.Join(repoRoot, doc))) {
				if !strings.Contains(block, healthKey+":") {
					continue
				}
				found++
				got, err := healthScriptIn(block)
				if err != nil {
					t.Fatalf("fenced block %d: %v", i+1, err)
				}
				if got != script {
					t.Errorf("fenced block %d: the health check differs from %s:\n%s", i+1, healthLua, lineDiff(script, got))
				}
			}
			if found == 0 {
				t.Errorf("no fenced block holds an argocd-cm %s snippet", healthKey)
			}
		})
	}
	// The example Application ships the check in its argocd-cm ConfigMap too.
	t.Run("docs/gitops/argocd-application.yaml", func(t *testing.T) {
		got, err := healthScriptIn(readFile(t, filepath.Join(repoRoot, "docs/gitops/argocd-application.yaml")))
		if err != nil {
			t.Fatal(err)
		}
		if got != script {
			t.Errorf("the health check differs from %s:\n%s", healthLua, lineDiff(script, got))
		}
	})
}

// The examples are copied into clusters: each document must parse and say
// what it is.
func TestExamplesParse(t *testing.T) {
	for _, file := range []string{"docs/gitops/flux-kustomization.yaml", "docs/gitops/argocd-application.yaml"} {
		t.Run(file, func(t *testing.T) {
			docs, err := yamlDocuments(readFile(t, filepath.Join(repoRoot, file)))
			if err != nil {
				t.Fatal(err)
			}
			if len(docs) == 0 {
				t.Fatal("no YAML documents")
			}
			for i, d := range docs {
				if d["apiVersion"] == nil || d["kind"] == nil || d["metadata"] == nil {
					t.Errorf("document %d has no apiVersion, kind or metadata", i+1)
				}
			}
		})
	}
}

type healthStatus struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// argoHealth runs a health script as Argo CD's util/lua (VM.ExecuteHealthLua)
// does, so that what passes here passes there.
func argoHealth(script string, obj *unstructured.Unstructured, openLibs bool) (healthStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: !openLibs})
	defer l.Close()
	// Without useOpenLibs Argo CD opens package, base and table, and an os
	// reduced to time and date. os is left out here: the check needs no clock,
	// and a script that reached for one should fail this test, not a cluster.
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return healthStatus{}, err
		}
	}
	// Argo CD's limit per run: a script that loops forever is an error.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", decodeValue(l, obj.Object))
	if err := l.DoString(script); err != nil {
		return healthStatus{}, err
	}
	// Argo CD reads hs back through JSON: a table becomes its HealthStatus, an
	// unknown status becomes Unknown, nil an empty status.
	ret := l.Get(-1)
	switch ret.Type() {
	case lua.LTNil:
		return healthStatus{}, nil
	case lua.LTTable:
	default:
		return healthStatus{}, fmt.Errorf("expect table output from Lua script, not %s", ret.Type())
	}
	encoded, err := luajson.Encode(ret)
	if err != nil {
		return healthStatus{}, err
	}
	var hs healthStatus
	if err := json.Unmarshal(encoded, &hs); err != nil {
		return healthStatus{}, fmt.Errorf("hs %s: %w", encoded, err)
	}
	switch hs.Status {
	case "Unknown", "Progressing", "Suspended", "Healthy", "Degraded", "Missing":
		return hs, nil
	}
	return healthStatus{Status: "Unknown", Message: argoInvalid}, nil
}

// decodeValue is Argo CD's (util/lua): every number, int64 from the API
// server included, becomes a Lua number (a float64).
func decodeValue(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case []any:
		arr := l.CreateTable(len(v), 0)
		for _, item := range v {
			arr.Append(decodeValue(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for key, item := range v {
			tbl.RawSetH(lua.LString(key), decodeValue(l, item))
		}
		return tbl
	}
	return lua.LNil
}

func conditionMessage(t *testing.T, pool *unstructured.Unstructured, conditionType string) string {
	t.Helper()
	conditions, _, err := unstructured.NestedSlice(pool.Object, "status", "conditions")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range conditions {
		if c, ok := c.(map[string]any); ok && c["type"] == conditionType {
			message, _ := c["message"].(string)
			return message
		}
	}
	t.Fatalf("the pool has no %s condition", conditionType)
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// fencedBlocks returns the contents of the ``` fenced blocks of a Markdown
// document, without the fences.
func fencedBlocks(markdown string) []string {
	var blocks []string
	var current *strings.Builder
	for line := range strings.Lines(markdown) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			if current == nil {
				current = &strings.Builder{}
			} else {
				blocks = append(blocks, current.String())
				current = nil
			}
			continue
		}
		if current != nil {
			current.WriteString(line)
		}
	}
	return blocks
}

// yamlDocuments parses a multi-document YAML stream.
func yamlDocuments(text string) ([]map[string]any, error) {
	var docs []map[string]any
	for i, part := range strings.Split("\n"+text, "\n---") {
		if strings.TrimSpace(stripComments(part)) == "" {
			continue
		}
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(part), &doc); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		docs = append(docs, doc)
	}
	return docs, nil
}

func stripComments(text string) string {
	var out strings.Builder
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			out.WriteString(line)
		}
	}
	return out.String()
}

// healthScriptIn parses YAML as argocd-cm would be parsed and returns the one
// value under healthKey, wherever it sits (a whole ConfigMap, its data, or a
// values file that renders one). Parsing, rather than cutting lines out,
// makes an indentation slip in a snippet fail here.
func healthScriptIn(text string) (string, error) {
	docs, err := yamlDocuments(text)
	if err != nil {
		return "", err
	}
	var found []string
	for _, d := range docs {
		found = append(found, valuesOf(d, healthKey)...)
	}
	if len(found) != 1 {
		return "", fmt.Errorf("want exactly one string under %s, found %d", healthKey, len(found))
	}
	return found[0], nil
}

func valuesOf(node any, key string) []string {
	var out []string
	switch n := node.(type) {
	case map[string]any:
		for k, v := range n {
			if s, ok := v.(string); ok && k == key {
				out = append(out, s)
			} else {
				out = append(out, valuesOf(v, key)...)
			}
		}
	case []any:
		for _, v := range n {
			out = append(out, valuesOf(v, key)...)
		}
	}
	return out
}

// lineDiff names the first line where two texts part.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		wl, gl := "<end>", "<end>"
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d: want %q, got %q", i+1, wl, gl)
		}
	}
	return "they differ only in line endings"
}
