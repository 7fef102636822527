package config

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The revision ConfigMap is written by whoever may write the agents'
// namespace, and read by an agent running as SYSTEM: what Parse accepts must
// be what the agent can stage and install without surprise, and must read
// back the same when the agent writes it on (the servicing plan).
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("testdata/rust-revision.json"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`{` + base + `}`))
	f.Add([]byte(`{` + base + `, "updates": {"source": "WindowsUpdate", "kbs": ["KB5043936"]}}`))
	f.Add([]byte(`{` + base + `, "updates": {"source": "Packages", "packages": [{"url": "https://x.example/d/KB.msu?sig=1", "sha256": "` + digest + `"}, {"path": "\\\\s\\u\\kb.CAB", "sha256": "` + digest + `"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			return
		}
		if r.Revision == "" || r.PatchLevel == "" {
			t.Fatalf("accepted a config without revision or patchLevel: %q", data)
		}
		checkUpdates(t, r.Updates)
		if a := r.RuntimeArchive; a != nil && (!strings.HasPrefix(strings.ToLower(a.URL), "https://") || validSHA256(a.SHA256) != nil) {
			t.Fatalf("accepted runtimeArchive %+v", a)
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(again)
		if err != nil {
			t.Fatalf("what Parse accepted does not parse once written back: %v\n%s", err, again)
		}
		// Compared as written: an empty list and an absent one are one
		// (omitempty), and every reader checks a length.
		if twice, _ := json.Marshal(back); !bytes.Equal(again, twice) {
			t.Fatalf("written back and read again, %s became %s", again, twice)
		}
	})
}

func checkUpdates(t *testing.T, u *Updates) {
	if u == nil {
		return
	}
	if u.Source == SourceWindowsUpdate {
		if len(u.Packages) > 0 {
			t.Fatalf("Windows Update with packages: %+v", u)
		}
		for _, kb := range u.KBs {
			if !validKB(kb) {
				t.Fatalf("accepted kb %q", kb)
			}
		}
		return
	}
	if u.Source != SourcePackages || len(u.Packages) == 0 || len(u.KBs) > 0 {
		t.Fatalf("accepted updates %+v", u)
	}
	seen := map[string]bool{}
	for _, p := range u.Packages {
		name := strings.ToLower(p.FileName())
		// Staged into one folder under that name: it must stay a file name there.
		if (p.URL == "") == (p.Path == "") || strings.ContainsAny(name, `/\`) ||
			!strings.HasSuffix(name, ".msu") && !strings.HasSuffix(name, ".cab") || seen[name] || validSHA256(p.SHA256) != nil {
			t.Fatalf("accepted package %+v (file name %q)", p, p.FileName())
		}
		seen[name] = true
	}
}
