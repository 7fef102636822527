package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// linuxImage is an OCI archive of a Linux image with one gzip layer holding
// /winpool, as buildah writes the operator's; edit changes its config before
// it is referenced, tamper its layer after.
func linuxImage(t *testing.T, edit func(cfg map[string]any), tamper bool) []byte {
	t.Helper()
	var plain bytes.Buffer
	lt := tar.NewWriter(&plain)
	body := []byte("\x7fELF operator")
	_ = lt.WriteHeader(&tar.Header{Name: "winpool", Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg})
	_, _ = lt.Write(body)
	_ = lt.Close()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(plain.Bytes())
	_ = zw.Close()
	layer := gz.Bytes()
	cfg := map[string]any{"os": "linux", "architecture": "amd64", "created": "2026-12-06T00:00:00Z",
		"config":  map[string]any{"Entrypoint": []string{"/winpool"}, "User": "65532:65532"},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{sha256Digest(plain.Bytes())}},
		"history": []any{map[string]any{"created_by": "buildah"}}}
	if edit != nil {
		edit(cfg)
	}
	config, _ := json.Marshal(cfg)
	man, _ := json.Marshal(manifest{SchemaVersion: 2, MediaType: mediaTypeManifest,
		Config: descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: sha256Digest(config), Size: int64(len(config))},
		Layers: []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Digest: sha256Digest(layer), Size: int64(len(layer))}}})
	idx, _ := json.Marshal(index{SchemaVersion: 2, MediaType: mediaTypeIndex,
		Manifests: []descriptor{{MediaType: mediaTypeManifest, Digest: sha256Digest(man), Size: int64(len(man))}}})
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	add := func(name string, b []byte) {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
		_, _ = tw.Write(b)
	}
	add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	add("index.json", idx)
	for _, b := range [][]byte{man, config} {
		add("blobs/sha256/"+strings.TrimPrefix(sha256Digest(b), "sha256:"), b)
	}
	name := "blobs/sha256/" + strings.TrimPrefix(sha256Digest(layer), "sha256:")
	if tamper {
		layer = append(slices.Clone(layer), 'x')
	}
	add(name, layer)
	_ = tw.Close()
	return out.Bytes()
}

var operatorImage = checkOptions{platform: "linux/amd64", entrypoint: "/winpool", user: "65532:65532", files: []string{"/winpool"}}

func TestCheckPassesASoundImage(t *testing.T) {
	if p := check(linuxImage(t, nil, false), operatorImage); len(p) > 0 {
		t.Fatalf("a sound image: %v", p)
	}
}

func TestCheckNamesWhatTheReleasePromisesAndTheImageBreaks(t *testing.T) {
	for name, c := range map[string]struct {
		edit   func(map[string]any)
		tamper bool
		want   string
	}{
		"another platform":       {edit: func(c map[string]any) { c["architecture"] = "arm64" }, want: "platform linux/arm64, want linux/amd64"},
		"root":                   {edit: func(c map[string]any) { c["config"].(map[string]any)["User"] = "0" }, want: `user "0", want "65532:65532"`},
		"another entrypoint":     {edit: func(c map[string]any) { c["config"].(map[string]any)["Entrypoint"] = []string{"/bin/sh"} }, want: `entrypoint ["/bin/sh"]`},
		"diff_ids of no layer":   {edit: func(c map[string]any) { c["rootfs"].(map[string]any)["diff_ids"] = []string{"sha256:00"} }, want: "config diff_ids [sha256:00] are not the layers'"},
		"a blob that is not its": {tamper: true, want: "holds content with digest"},
	} {
		p := check(linuxImage(t, c.edit, c.tamper), operatorImage)
		if !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, c.want) }) {
			t.Errorf("%s: %v, want one naming %q", name, p, c.want)
		}
	}
	missing := operatorImage
	missing.files = []string{"/winpool", "/etc/passwd"}
	if p := check(linuxImage(t, nil, false), missing); !slices.Equal(p, []string{"/etc/passwd is in no layer"}) {
		t.Errorf("a missing file: %v", p)
	}
}
