package config

import (
	"strings"
	"testing"
)

const base = `"revision": "r1", "patchLevel": "10.0.20348.2762"`

var digest = strings.Repeat("ab", 32)

func TestParseOptionalFields(t *testing.T) {
	for _, tc := range []struct {
		name       string
		json       string
		wantSource UpdateSource
		wantPkgs   int
		wantArch   bool
	}{
		{"absent means Windows Update", `{` + base + `}`, SourceWindowsUpdate, 0, false},
		{"null means Windows Update", `{` + base + `, "updates": null, "runtimeArchive": null}`, SourceWindowsUpdate, 0, false},
		{"explicit Windows Update", `{` + base + `, "updates": {"source": "WindowsUpdate"}}`, SourceWindowsUpdate, 0, false},
		{"Windows Update pinned by KB", `{` + base + `, "updates": {"source": "WindowsUpdate", "kbs": ["KB5043936", "KB5044281"]}}`, SourceWindowsUpdate, 0, false},
		{"packages by url and path", `{` + base + `, "updates": {"source": "Packages", "packages": [
			{"url": "https://updates.example.com/windows10.0-kb5044281-x64.msu", "sha256": "` + digest + `"},
			{"path": "C:\\updates\\2024-10\\ssu.cab", "sha256": "` + digest + `"}]}}`, SourcePackages, 2, false},
		{"runtime archive", `{` + base + `, "runtimeArchive": {"url": "https://example.com/containerd-1.7.22-windows-amd64.tar.gz", "sha256": "` + digest + `"}}`,
			SourceWindowsUpdate, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.json))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if r.UpdateSource() != tc.wantSource {
				t.Errorf("source = %q, want %q", r.UpdateSource(), tc.wantSource)
			}
			if n := 0; r.Updates != nil {
				n = len(r.Updates.Packages)
				if n != tc.wantPkgs {
					t.Errorf("packages = %d, want %d", n, tc.wantPkgs)
				}
			} else if tc.wantPkgs != 0 {
				t.Errorf("no updates parsed, want %d packages", tc.wantPkgs)
			}
			if (r.RuntimeArchive != nil) != tc.wantArch {
				t.Errorf("runtimeArchive = %+v, want set: %v", r.RuntimeArchive, tc.wantArch)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	pkg := func(fields string) string {
		return `{` + base + `, "updates": {"source": "Packages", "packages": [` + fields + `]}}`
	}
	for _, tc := range []struct {
		name, json, wantInErr string
	}{
		{"unknown source", `{` + base + `, "updates": {"source": "Intune"}}`, `"Intune"`},
		{"windows update with packages", `{` + base + `, "updates": {"source": "WindowsUpdate", "packages": [{"path": "C:\\a.msu", "sha256": "` + digest + `"}]}}`, "takes no packages"},
		{"packages without any", `{` + base + `, "updates": {"source": "Packages"}}`, "no packages"},
		{"packages with kbs", `{` + base + `, "updates": {"source": "Packages", "kbs": ["KB5044281"], "packages": [{"path": "C:\\a.msu", "sha256": "` + digest + `"}]}}`, "takes no kbs"},
		{"a kb that is a title", `{` + base + `, "updates": {"source": "WindowsUpdate", "kbs": ["2024-10 Cumulative Update"]}}`, `kbs[0] "2024-10 Cumulative Update" is not a KB ID`},
		{"a kb without its digits", `{` + base + `, "updates": {"source": "WindowsUpdate", "kbs": ["KB12"]}}`, "is not a KB ID"},
		{"both url and path", pkg(`{"url": "https://x.example/a.msu", "path": "C:\\a.msu", "sha256": "` + digest + `"}`), "packages[0]: has both"},
		{"neither url nor path", pkg(`{"sha256": "` + digest + `"}`), "neither url nor path"},
		{"http url", pkg(`{"url": "http://x.example/a.msu", "sha256": "` + digest + `"}`), "not an https"},
		{"relative path", pkg(`{"path": "updates\\a.msu", "sha256": "` + digest + `"}`), "not an absolute Windows path"},
		{"not msu or cab", pkg(`{"path": "C:\\a.exe", "sha256": "` + digest + `"}`), ".msu and .cab"},
		{"uppercase digest", pkg(`{"path": "C:\\a.msu", "sha256": "` + strings.ToUpper(digest) + `"}`), "64 lowercase hex"},
		{"short digest", pkg(`{"path": "C:\\a.msu", "sha256": "abc"}`), "64 lowercase hex"},
		{"same file name twice", pkg(`{"path": "C:\\a\\kb.msu", "sha256": "` + digest + `"}, {"url": "https://x.example/KB.msu", "sha256": "` + digest + `"}`), "packages[0] and packages[1]"},
		{"archive not https", `{` + base + `, "runtimeArchive": {"url": "ftp://x/containerd.tar.gz", "sha256": "` + digest + `"}}`, "runtimeArchive: url"},
		{"archive not tar.gz", `{` + base + `, "runtimeArchive": {"url": "https://x.example/containerd.zip", "sha256": "` + digest + `"}}`, ".tar.gz"},
		{"archive digest missing", `{` + base + `, "runtimeArchive": {"url": "https://x.example/c.tar.gz"}}`, "runtimeArchive: sha256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.wantInErr) {
				t.Errorf("Parse = %v, want an error naming %q", err, tc.wantInErr)
			}
		})
	}
}

func TestPackageFileName(t *testing.T) {
	for in, want := range map[Package]string{
		{URL: "https://x.example/dir/windows10.0-kb5044281-x64.msu?sig=1"}: "windows10.0-kb5044281-x64.msu",
		{Path: `C:\updates\2024-10\ssu.cab`}:                               "ssu.cab",
		{Path: `\\share\updates\lcu.msu`}:                                  "lcu.msu",
	} {
		if got := in.FileName(); got != want {
			t.Errorf("%+v.FileName() = %q, want %q", in, got, want)
		}
	}
}
