package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fakeExe stands in for winpool-agent.exe: what matters is that the layer
// carries these exact bytes.
func fakeExe() []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 200_000)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	copy(b, "MZ")
	return b
}

var testEpoch = time.Unix(1_764_000_000, 0).UTC()

func testOptions() buildOptions {
	return buildOptions{
		exeName: "winpool-agent.exe",
		exe:     fakeExe(),
		ref:     "ghcr.io/winpool/agent:0.2.0",
		labels:  map[string]string{"org.opencontainers.image.version": "0.2.0", "org.opencontainers.image.title": "winpool-agent"},
		epoch:   testEpoch,
	}
}

func buildTest(t *testing.T, o buildOptions) []byte {
	t.Helper()
	archive, err := buildArchive(o)
	if err != nil {
		t.Fatal(err)
	}
	return archive
}

// untar returns a tar's headers and file contents in order.
func untar(t *testing.T, b []byte) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	var hs []*tar.Header
	data := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hs, data
		}
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		if data[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// TestImage reads the archive back by hand, index -> manifest -> config ->
// layer, then runs verify on it.
func TestImage(t *testing.T) {
	o := testOptions()
	archive := buildTest(t, o)

	_, files := untar(t, archive)
	blob := func(d descriptor) []byte {
		t.Helper()
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
		if !ok {
			t.Fatalf("no blob %s", d.Digest)
		}
		if int64(len(b)) != d.Size || sha256Digest(b) != d.Digest {
			t.Fatalf("blob %s: %d bytes, digest %s; descriptor %+v", d.Digest, len(b), sha256Digest(b), d)
		}
		return b
	}
	if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout %s", got)
	}
	var idx map[string]any
	mustJSON(t, files["index.json"], &idx)
	mds := idx["manifests"].([]any)
	if len(mds) != 1 {
		t.Fatalf("%d manifests", len(mds))
	}
	md := mds[0].(map[string]any)
	if !reflect.DeepEqual(md["platform"], map[string]any{"os": "windows", "architecture": "amd64"}) {
		t.Fatalf("platform %v (no os.version: a HostProcess image runs on every Windows build)", md["platform"])
	}
	if md["annotations"].(map[string]any)["io.containerd.image.name"] != o.ref {
		t.Fatalf("annotations %v", md["annotations"])
	}
	var man manifest
	mustJSON(t, blob(descriptor{Digest: md["digest"].(string), Size: int64(md["size"].(float64))}), &man)
	if man.MediaType != "application/vnd.oci.image.manifest.v1+json" || len(man.Layers) != 1 ||
		man.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Fatalf("manifest %+v", man)
	}
	var cfg map[string]any
	mustJSON(t, blob(man.Config), &cfg)
	if cfg["os"] != "windows" || cfg["architecture"] != "amd64" || cfg["os.version"] != nil {
		t.Fatalf("config platform %v/%v os.version %v", cfg["os"], cfg["architecture"], cfg["os.version"])
	}
	c := cfg["config"].(map[string]any)
	if !reflect.DeepEqual(c["Entrypoint"], []any{"winpool-agent.exe"}) || c["Env"] != nil {
		t.Fatalf("config Entrypoint %v Env %v", c["Entrypoint"], c["Env"])
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(man.Layers[0])))
	if err != nil {
		t.Fatal(err)
	}
	layer, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if diffID := cfg["rootfs"].(map[string]any)["diff_ids"].([]any)[0]; diffID != sha256Digest(layer) {
		t.Fatalf("diff_id %v, layer %s", diffID, sha256Digest(layer))
	}

	headers, contents := untar(t, layer)
	var names []string
	for _, h := range headers {
		names = append(names, h.Name)
		if h.Format != tar.FormatPAX || h.PAXRecords["MSWINDOWS.fileattr"] == "" || h.PAXRecords["LIBARCHIVE.creationtime"] != "1764000000" {
			t.Errorf("%s: format %v, PAX records %v", h.Name, h.Format, h.PAXRecords)
		}
	}
	want := []string{
		"Files",
		"Files/Windows",
		"Files/Windows/System32",
		"Files/Windows/System32/config",
		"Files/Windows/System32/config/DEFAULT",
		"Files/Windows/System32/config/SAM",
		"Files/Windows/System32/config/SECURITY",
		"Files/Windows/System32/config/SOFTWARE",
		"Files/Windows/System32/config/SYSTEM",
		"Files/winpool-agent.exe",
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("layer entries\n%s\nwant\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	if !bytes.Equal(contents["Files/winpool-agent.exe"], o.exe) {
		t.Error("Files/winpool-agent.exe does not hold the executable's bytes")
	}
	exe := headers[len(headers)-1]
	if exe.Name != "Files/winpool-agent.exe" {
		t.Errorf("last entry %s, want Files/winpool-agent.exe", exe.Name)
	} else if exe.PAXRecords["MSWINDOWS.fileattr"] != "32" || exe.PAXRecords["MSWINDOWS.rawsd"] != fileSecurityDescriptor {
		t.Errorf("exe PAX records %v", exe.PAXRecords)
	}
	if headers[1].PAXRecords["MSWINDOWS.fileattr"] != "16" || headers[1].Typeflag != tar.TypeDir {
		t.Fatalf("Files/Windows: type %c, PAX records %v", headers[1].Typeflag, headers[1].PAXRecords)
	}

	if summary, err := verify(archive, o); err != nil {
		t.Fatalf("verify: %v", err)
	} else {
		t.Logf("verified:\n%s", summary)
	}
}

func TestDeterministic(t *testing.T) {
	a, b := buildTest(t, testOptions()), buildTest(t, testOptions())
	if !bytes.Equal(a, b) {
		t.Fatal("two builds from the same inputs differ")
	}
	o := testOptions()
	o.epoch = o.epoch.Add(time.Second)
	if bytes.Equal(a, buildTest(t, o)) {
		t.Fatal("the epoch does not reach the archive")
	}
}

// rewriteLayer rebuilds the image with each layer entry passed through edit
// (which may rename it, change its header or drop it: return false).
func rewriteLayer(t *testing.T, o buildOptions, edit func(h *tar.Header, data *[]byte) bool, extra ...entry) []byte {
	t.Helper()
	entries, err := layerEntries(o.exeName, o.exe)
	if err != nil {
		t.Fatal(err)
	}
	layer, err := writeLayer(append(entries, extra...), o.epoch)
	if err != nil {
		t.Fatal(err)
	}
	headers, contents := untar(t, layer)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range headers {
		data := contents[h.Name]
		if !edit(h, &data) {
			continue
		}
		h.Size = int64(len(data))
		if h.Typeflag == tar.TypeDir {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	archive, err := buildImage(o, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return archive
}

// rewriteJSON edits the config, the manifest or the index and fixes the
// digests that point at what changed, so only the edit is wrong.
func rewriteJSON(t *testing.T, archive []byte, which string, edit func(map[string]any)) []byte {
	t.Helper()
	headers, files := untar(t, archive)
	var idx, man, cfg map[string]any
	mustJSON(t, files["index.json"], &idx)
	md := idx["manifests"].([]any)[0].(map[string]any)
	manName := "blobs/sha256/" + strings.TrimPrefix(md["digest"].(string), "sha256:")
	mustJSON(t, files[manName], &man)
	cd := man["config"].(map[string]any)
	cfgName := "blobs/sha256/" + strings.TrimPrefix(cd["digest"].(string), "sha256:")
	mustJSON(t, files[cfgName], &cfg)
	delete(files, manName)
	delete(files, cfgName)
	switch which {
	case "config":
		edit(cfg)
	case "manifest":
		edit(man)
	case "index":
		edit(idx)
	}
	put := func(v any, d map[string]any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		d["digest"], d["size"] = sha256Digest(b), len(b)
		files["blobs/sha256/"+strings.TrimPrefix(sha256Digest(b), "sha256:")] = b
	}
	put(cfg, cd)
	put(man, md)
	b, err := json.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	files["index.json"] = b
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range headers {
		if h.Typeflag == tar.TypeDir {
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, data := range files {
		if strings.HasSuffix(name, "/") {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestVerifyRejects breaks one rule at a time: each broken image must fail
// verification, for that rule's reason.
func TestVerifyRejects(t *testing.T) {
	o := testOptions()
	keep := func(*tar.Header, *[]byte) bool { return true }
	ggcrSD := "AQAAgBQAAAAkAAAAAAAAAAAAAAABAgAAAAAABSAAAAAhAgAAAQIAAAAAAAUgAAAAIQIAAA=="
	cases := []struct {
		name    string
		archive func() []byte
		want    string
	}{
		{"exe at the layer root", func() []byte {
			return rewriteLayer(t, o, func(h *tar.Header, _ *[]byte) bool {
				h.Name = strings.Replace(h.Name, "Files/winpool-agent.exe", "winpool-agent.exe", 1)
				return true
			})
		}, "entry winpool-agent.exe: not under Files/"},
		{"a Hives directory", func() []byte {
			return rewriteLayer(t, o, keep, entry{name: "Hives", dir: true})
		}, "a base layer has no Hives/"},
		{"a hive missing", func() []byte {
			return rewriteLayer(t, o, func(h *tar.Header, _ *[]byte) bool { return !strings.HasSuffix(h.Name, "/SAM") })
		}, "no Files/Windows/System32/config/SAM"},
		{"an empty hive file (the pre-2025 base image)", func() []byte {
			return rewriteLayer(t, o, func(h *tar.Header, d *[]byte) bool {
				if strings.HasSuffix(h.Name, "/SYSTEM") {
					*d = nil
				}
				return true
			})
		}, "SYSTEM: not a registry hive"},
		{"a directory without its entry", func() []byte {
			return rewriteLayer(t, o, func(h *tar.Header, _ *[]byte) bool { return h.Name != "Files/Windows/System32" })
		}, "comes before its directory Files/Windows/System32"},
		{"an entry twice", func() []byte {
			return rewriteLayer(t, o, keep, entry{name: "Files/winpool-agent.exe", data: []byte("MZ")})
		}, "entry Files/winpool-agent.exe: twice"},
		{"a directory without FILE_ATTRIBUTE_DIRECTORY", func() []byte {
			return rewriteLayer(t, o, func(h *tar.Header, _ *[]byte) bool {
				if h.Name == "Files/Windows" {
					h.PAXRecords["MSWINDOWS.fileattr"] = "32"
				}
				return true
			})
		}, "lacks FILE_ATTRIBUTE_DIRECTORY"},
		{"no fileattr record", func() []byte {
			return rewriteLayer(t, o, func(h *tar.Header, _ *[]byte) bool {
				delete(h.PAXRecords, "MSWINDOWS.fileattr")
				return true
			})
		}, "MSWINDOWS.fileattr"},
		{"go-containerregistry's DACL-less descriptor", func() []byte {
			return rewriteLayer(t, o, func(h *tar.Header, _ *[]byte) bool {
				if h.Name == "Files/winpool-agent.exe" {
					h.PAXRecords["MSWINDOWS.rawsd"] = ggcrSD
				}
				return true
			})
		}, "no DACL"},
		{"a symlink", func() []byte {
			return rewriteLayer(t, o, func(h *tar.Header, d *[]byte) bool {
				if h.Name == "Files/winpool-agent.exe" {
					h.Typeflag, h.Linkname, *d = tar.TypeSymlink, "Windows", nil
				}
				return true
			})
		}, "only directories and regular files"},
		{"other bytes for the exe", func() []byte {
			return rewriteLayer(t, o, func(h *tar.Header, d *[]byte) bool {
				if h.Name == "Files/winpool-agent.exe" {
					*d = append([]byte{}, (*d)[:len(*d)-1]...)
				}
				return true
			})
		}, "Files/winpool-agent.exe: 199999 bytes"},
		{"os.version in the config", func() []byte {
			return rewriteJSON(t, buildTest(t, o), "config", func(m map[string]any) { m["os.version"] = "10.0.20348.1" })
		}, "config: os.version 10.0.20348.1 is set"},
		{"os.version in the index", func() []byte {
			return rewriteJSON(t, buildTest(t, o), "index", func(m map[string]any) {
				m["manifests"].([]any)[0].(map[string]any)["platform"].(map[string]any)["os.version"] = "10.0.17763.1"
			})
		}, "index.json: os.version 10.0.17763.1 is set"},
		{"a linux platform", func() []byte {
			return rewriteJSON(t, buildTest(t, o), "config", func(m map[string]any) { m["os"] = "linux" })
		}, "config: platform linux/amd64"},
		{"another entrypoint", func() []byte {
			return rewriteJSON(t, buildTest(t, o), "config", func(m map[string]any) {
				m["config"].(map[string]any)["Entrypoint"] = []string{"C:\\winpool-agent.exe"}
			})
		}, "config: Entrypoint"},
		{"a diff_id that is not the layer's", func() []byte {
			return rewriteJSON(t, buildTest(t, o), "config", func(m map[string]any) {
				m["rootfs"].(map[string]any)["diff_ids"] = []string{sha256Digest([]byte("x"))}
			})
		}, "config: diff_id"},
		{"a layer size off by one", func() []byte {
			return rewriteJSON(t, buildTest(t, o), "manifest", func(m map[string]any) {
				l := m["layers"].([]any)[0].(map[string]any)
				l["size"] = l["size"].(float64) + 1
			})
		}, "the descriptor says"},
		{"a corrupted blob", func() []byte {
			a := buildTest(t, o)
			// The gzip stream's last bytes are its CRC and length; flip one
			// byte well inside the biggest blob instead.
			i := bytes.Index(a, []byte{0x1f, 0x8b, 0x08}) + 1000
			a[i] ^= 0xff
			return a
		}, "holds content with digest"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := verify(c.archive(), o)
			if err == nil {
				t.Fatalf("verify passed; want an error containing %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("verify: %v\nwant an error containing %q", err, c.want)
			}
			t.Logf("rejected: %v", err)
		})
	}
}

func TestEmbeddedHive(t *testing.T) {
	hive, err := emptyHive()
	if err != nil {
		t.Fatal(err)
	}
	if len(hive) != 8192 {
		t.Fatalf("hive of %d bytes, upstream's is 8192", len(hive))
	}
	if err := checkHive(hive); err != nil {
		t.Fatal(err)
	}
}

func TestSecurityDescriptors(t *testing.T) {
	for _, sd := range []string{dirSecurityDescriptor, fileSecurityDescriptor} {
		if err := checkSecurityDescriptor(sd); err != nil {
			t.Errorf("%s: %v", sd[:16], err)
		}
	}
}
