package config

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// testdata/rust-revision.json is what the operator writes into a revision
// ConfigMap for a pool that sets every field (src/contract.rs writes it from
// the Rust types): the agent reads all of it, and drops nothing.
func TestTheOperatorsRevisionConfigReadsWhole(t *testing.T) {
	data, err := os.ReadFile("testdata/rust-revision.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse(data)
	if err != nil {
		t.Fatalf("the operator's revision config does not parse: %v", err)
	}
	if r.Updates == nil || len(r.Updates.Packages) != 2 || r.RuntimeArchive == nil || r.RuntimeUpgrade != "InPlace" ||
		r.CSIProxyVersion == nil || r.RuntimeVersion == nil || r.OSBuild != 20348 {
		t.Errorf("fields lost: %+v", r)
	}
	again, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(again, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("the agent's types do not hold every field the operator writes:\n%s\nwant\n%s", again, data)
	}
}
