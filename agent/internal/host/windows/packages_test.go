package windows

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/stage"
)

func digest(b string) string { h := sha256.Sum256([]byte(b)); return hex.EncodeToString(h[:]) }

// dismCalls is a DISM that answers from a table by file or folder name and
// records what it was given.
type dismCalls struct {
	codes map[string]int
	paths []string
}

func (d *dismCalls) run(_ context.Context, path string) (int, error) {
	d.paths = append(d.paths, path)
	return d.codes[filepath.Base(path)], nil
}

// packageSource serves ssu.cab and lcu.msu over https and holds
// checkpoint.msu in a host folder.
func packageSource(t *testing.T) (*httptest.Server, string) {
	files := map[string]string{"/ssu.cab": "ssu", "/lcu.msu": "lcu"}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, ok := files[r.URL.Path]; ok {
			w.Write([]byte(b))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	hostDir := t.TempDir()
	os.WriteFile(filepath.Join(hostDir, "checkpoint.msu"), []byte("checkpoint"), 0o600)
	return srv, hostDir
}

func TestInstallPackages(t *testing.T) {
	srv, hostDir := packageSource(t)
	ssu := config.Package{URL: srv.URL + "/ssu.cab", SHA256: digest("ssu")}
	checkpoint := config.Package{Path: filepath.Join(hostDir, "checkpoint.msu"), SHA256: digest("checkpoint")}
	lcu := config.Package{URL: srv.URL + "/lcu.msu", SHA256: digest("lcu")}
	for _, tc := range []struct {
		name      string
		build     string
		codes     map[string]int
		wantPaths []string
		wantExit  int
		// wantInstalled: the record, by file name.
		wantInstalled []host.InstalledUpdate
	}{
		{"ltsc2022: each package in order, then a reboot", "10.0.20348.2700",
			map[string]int{"ssu.cab": 0, "checkpoint.msu": 0, "lcu.msu": 3010},
			[]string{"r1/01/ssu.cab", "r1/02/checkpoint.msu", "r1/03/lcu.msu"}, 3010,
			[]host.InstalledUpdate{{KB: "ssu.cab"}, {KB: "checkpoint.msu"}, {KB: "lcu.msu"}}},
		{"ltsc2025: the checkpoint pair from one folder", "10.0.26100.1742",
			map[string]int{"ssu.cab": 0, "02": 3010},
			[]string{"r1/01/ssu.cab", "r1/02"}, 3010,
			[]host.InstalledUpdate{{KB: "ssu.cab"}, {KB: "checkpoint.msu"}, {KB: "lcu.msu"}}},
		{"the servicing stack fails: nothing after it runs", "10.0.20348.2700",
			map[string]int{"ssu.cab": 0x800F0922},
			[]string{"r1/01/ssu.cab"}, 0x800F0922, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "r0", "01"), 0o700) // an earlier revision's packages
			d := &dismCalls{codes: tc.codes}
			s := servicing{dir: dir, client: srv.Client(), dism: d.run}
			req := host.UpdateRequest{Revision: "r1", Source: config.SourcePackages, Packages: []config.Package{ssu, checkpoint, lcu}}
			res, err := s.install(context.Background(), req, build(t, tc.build))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range d.paths {
				rel, _ := filepath.Rel(dir, p)
				got = append(got, filepath.ToSlash(rel))
			}
			if !reflect.DeepEqual(got, tc.wantPaths) {
				t.Errorf("DISM ran on %v, want %v", got, tc.wantPaths)
			}
			if uint32(res.ExitCode) != uint32(tc.wantExit) {
				t.Errorf("exit 0x%08X (%s), want 0x%08X", uint32(res.ExitCode), res.Detail, uint32(tc.wantExit))
			}
			if !reflect.DeepEqual(res.Installed, tc.wantInstalled) {
				t.Errorf("installed %+v, want %+v", res.Installed, tc.wantInstalled)
			}
			if _, err := os.Stat(filepath.Join(dir, "r0")); err == nil {
				t.Error("the earlier revision's packages are still staged")
			}
		})
	}
}

// A package whose digest is wrong stops everything before DISM runs at all:
// the servicing stack must not go in without the update it prepares for.
func TestInstallPackagesChecksEveryDigestFirst(t *testing.T) {
	srv, _ := packageSource(t)
	d := &dismCalls{}
	s := servicing{dir: t.TempDir(), client: srv.Client(), dism: d.run}
	wrong := digest("not the lcu")
	req := host.UpdateRequest{Revision: "r1", Source: config.SourcePackages, Packages: []config.Package{
		{URL: srv.URL + "/ssu.cab", SHA256: digest("ssu")},
		{URL: srv.URL + "/lcu.msu", SHA256: wrong},
	}}
	_, err := s.install(context.Background(), req, build(t, "10.0.20348.2700"))
	var mm *stage.MismatchError
	if !errors.As(err, &mm) || mm.Want != wrong || mm.Got != digest("lcu") || !strings.Contains(err.Error(), "/lcu.msu") {
		t.Fatalf("err = %v, want a digest mismatch naming lcu.msu with both digests", err)
	}
	if len(d.paths) != 0 {
		t.Errorf("DISM ran on %v before every package was verified", d.paths)
	}
}

func build(t *testing.T, s string) host.Build {
	t.Helper()
	b, err := host.ParseBuild(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRemoveOtherRevisions(t *testing.T) {
	dir := t.TempDir()
	for _, rev := range []string{"r0", "r1", "r2"} {
		os.MkdirAll(filepath.Join(dir, rev, "01"), 0o700)
		os.WriteFile(filepath.Join(dir, rev, "01", "kb.msu"), []byte("x"), 0o600)
	}
	if err := removeOtherRevisions(dir, "r1"); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "r1" {
		t.Errorf("left %v, want r1 alone", entries)
	}
	if err := removeOtherRevisions(filepath.Join(dir, "none"), "r1"); err != nil {
		t.Errorf("no folder yet: %v", err)
	}
}
