package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"reflect"
	"strconv"
	"strings"
)

// verify reads an OCI image layout archive back and checks it against what
// a Windows node needs to import and start it as a HostProcess container
// (the rules are explained in layer.go and image.go). It spells out the
// expected paths itself instead of reusing the builder's, so a builder that
// puts a file in the wrong place fails here. want.exe is the executable the
// layer must carry at Files/<want.exeName>; want.ref and want.labels are
// checked when set.
func verify(archive []byte, want buildOptions) (summary string, err error) {
	blobs, meta, err := readLayout(archive)
	if err != nil {
		return "", err
	}
	if string(meta["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		return "", fmt.Errorf("oci-layout is %q", meta["oci-layout"])
	}
	md, err := verifyIndex(meta["index.json"], want)
	if err != nil {
		return "", fmt.Errorf("index.json: %w", err)
	}
	man, cfgJSON, layerGz, err := verifyManifest(blobs, md)
	if err != nil {
		return "", err
	}
	cfg, err := verifyConfig(cfgJSON, man, want)
	if err != nil {
		return "", err
	}
	if err := verifyLayerBlob(layerGz, cfg, want); err != nil {
		return "", err
	}
	return fmt.Sprintf("manifest %s (%d bytes)\nconfig   %s (%d bytes)\nlayer    %s (%d bytes, diff_id %s)\n",
		md.Digest, md.Size, man.Config.Digest, man.Config.Size, man.Layers[0].Digest, man.Layers[0].Size, cfg.RootFS.DiffIDs[0]), nil
}

// verifyIndex checks index.json: one windows/amd64 manifest, named want.ref when set.
func verifyIndex(indexJSON []byte, want buildOptions) (descriptor, error) {
	if err := noOSVersion(indexJSON, "manifests", "platform"); err != nil {
		return descriptor{}, err
	}
	var idx index
	if err := strictJSON(indexJSON, &idx); err != nil {
		return descriptor{}, err
	}
	if idx.SchemaVersion != 2 || idx.MediaType != mediaTypeIndex {
		return descriptor{}, fmt.Errorf("schemaVersion %d, mediaType %q", idx.SchemaVersion, idx.MediaType)
	}
	if len(idx.Manifests) != 1 {
		return descriptor{}, fmt.Errorf("%d manifests, want 1", len(idx.Manifests))
	}
	md := idx.Manifests[0]
	if md.MediaType != mediaTypeManifest {
		return descriptor{}, fmt.Errorf("manifest mediaType %q", md.MediaType)
	}
	if md.Platform == nil || *md.Platform != (platform{Architecture: "amd64", OS: "windows"}) {
		return descriptor{}, fmt.Errorf("platform %+v, want windows/amd64", md.Platform)
	}
	if want.ref != "" {
		tag, _ := tagOf(want.ref)
		if md.Annotations[annotationContainerdName] != want.ref || md.Annotations[annotationRefName] != tag {
			return descriptor{}, fmt.Errorf("annotations %v, want %s=%s and %s=%s",
				md.Annotations, annotationContainerdName, want.ref, annotationRefName, tag)
		}
	}
	return md, nil
}

// verifyManifest reads the manifest md names and returns it with its config
// and its one gzip layer; the layout holds those three blobs and no other.
func verifyManifest(blobs map[string][]byte, md descriptor) (man manifest, cfgJSON, layerGz []byte, err error) {
	manJSON, err := blob(blobs, md)
	if err != nil {
		return man, nil, nil, fmt.Errorf("index.json -> manifest: %w", err)
	}
	if err := strictJSON(manJSON, &man); err != nil {
		return man, nil, nil, fmt.Errorf("manifest: %w", err)
	}
	if man.SchemaVersion != 2 || man.MediaType != mediaTypeManifest {
		return man, nil, nil, fmt.Errorf("manifest: schemaVersion %d, mediaType %q", man.SchemaVersion, man.MediaType)
	}
	if man.Config.MediaType != mediaTypeConfig {
		return man, nil, nil, fmt.Errorf("manifest: config mediaType %q", man.Config.MediaType)
	}
	if len(man.Layers) != 1 || man.Layers[0].MediaType != mediaTypeLayerGz {
		return man, nil, nil, fmt.Errorf("manifest: layers %+v, want one %s", man.Layers, mediaTypeLayerGz)
	}
	if cfgJSON, err = blob(blobs, man.Config); err != nil {
		return man, nil, nil, fmt.Errorf("manifest -> config: %w", err)
	}
	if layerGz, err = blob(blobs, man.Layers[0]); err != nil {
		return man, nil, nil, fmt.Errorf("manifest -> layer: %w", err)
	}
	if len(blobs) != 3 {
		return man, nil, nil, fmt.Errorf("%d blobs, want 3 (manifest, config, layer)", len(blobs))
	}
	return man, cfgJSON, layerGz, nil
}

// verifyConfig checks the image config: windows/amd64, one diff_id, and
// want's entrypoint and labels (also the manifest's annotations) when set.
func verifyConfig(cfgJSON []byte, man manifest, want buildOptions) (imageConfig, error) {
	var cfg imageConfig
	if err := noOSVersion(cfgJSON); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if err := strictJSON(cfgJSON, &cfg); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if cfg.OS != "windows" || cfg.Architecture != "amd64" {
		return cfg, fmt.Errorf("config: platform %s/%s, want windows/amd64", cfg.OS, cfg.Architecture)
	}
	if want.exeName != "" && !reflect.DeepEqual(cfg.Config.Entrypoint, []string{want.exeName}) {
		return cfg, fmt.Errorf("config: Entrypoint %q, want [%q]", cfg.Config.Entrypoint, want.exeName)
	}
	if want.labels != nil && !reflect.DeepEqual(cfg.Config.Labels, want.labels) {
		return cfg, fmt.Errorf("config: Labels %v, want %v", cfg.Config.Labels, want.labels)
	}
	if want.labels != nil && !reflect.DeepEqual(man.Annotations, want.labels) {
		return cfg, fmt.Errorf("manifest: annotations %v, want %v", man.Annotations, want.labels)
	}
	if cfg.RootFS.Type != "layers" || len(cfg.RootFS.DiffIDs) != 1 {
		return cfg, fmt.Errorf("config: rootfs %+v, want one diff_id", cfg.RootFS)
	}
	return cfg, nil
}

// verifyLayerBlob unpacks the gzip layer, matches it to the config's
// diff_id and checks its files (verifyLayer).
func verifyLayerBlob(layerGz []byte, cfg imageConfig, want buildOptions) error {
	if !bytes.HasPrefix(layerGz, []byte{0x1f, 0x8b}) {
		return errors.New("layer: not gzip")
	}
	zr, err := gzip.NewReader(bytes.NewReader(layerGz))
	if err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	layerTar, err := io.ReadAll(zr)
	if err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	// containerd refuses a layer whose uncompressed digest is not the
	// config's diff_id ("wrong diff id calculated on extraction").
	if got := sha256Digest(layerTar); got != cfg.RootFS.DiffIDs[0] {
		return fmt.Errorf("config: diff_id %s, the layer's uncompressed digest is %s", cfg.RootFS.DiffIDs[0], got)
	}
	if err := verifyLayer(layerTar, want); err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	return nil
}

// readLayout returns the archive's blobs by digest (each checked against
// its name) and its other files by name.
func readLayout(archive []byte) (blobs, meta map[string][]byte, err error) {
	blobs, meta = map[string][]byte{}, map[string][]byte{}
	seen := map[string]bool{}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("archive: %w", err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if seen[name] {
			return nil, nil, fmt.Errorf("archive: %s twice", name)
		}
		seen[name] = true
		if h.Typeflag == tar.TypeDir {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			return nil, nil, fmt.Errorf("archive: %s is not a regular file", name)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, nil, fmt.Errorf("archive: %s: %w", name, err)
		}
		if hexDigest, ok := strings.CutPrefix(name, "blobs/sha256/"); ok {
			if got := sha256Digest(data); got != "sha256:"+hexDigest {
				return nil, nil, fmt.Errorf("archive: %s holds content with digest %s", name, got)
			}
			blobs["sha256:"+hexDigest] = data
		} else {
			meta[name] = data
		}
	}
	for _, name := range []string{"oci-layout", "index.json"} {
		if _, ok := meta[name]; !ok {
			return nil, nil, fmt.Errorf("archive: no %s", name)
		}
	}
	return blobs, meta, nil
}

// blob returns the blob a descriptor points at, checking its size (the
// digest was checked when the archive was read).
func blob(blobs map[string][]byte, d descriptor) ([]byte, error) {
	b, ok := blobs[d.Digest]
	if !ok {
		return nil, fmt.Errorf("no blob %s", d.Digest)
	}
	if int64(len(b)) != d.Size {
		return nil, fmt.Errorf("blob %s is %d bytes, the descriptor says %d", d.Digest, len(b), d.Size)
	}
	return b, nil
}

// strictJSON decodes refusing fields the types above do not know, so a
// stray field (an os.version among them) is seen.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// noOSVersion checks that no os.version is set at the object reached
// through keys (arrays are searched element by element).
func noOSVersion(doc []byte, keys ...string) error {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return err
	}
	var walk func(v any, keys []string) error
	walk = func(v any, keys []string) error {
		switch t := v.(type) {
		case []any:
			for _, e := range t {
				if err := walk(e, keys); err != nil {
					return err
				}
			}
		case map[string]any:
			if len(keys) == 0 {
				if osv, ok := t["os.version"]; ok {
					return fmt.Errorf("os.version %v is set: containerd would pull the image only onto that Windows build's hosts", osv)
				}
				return nil
			}
			return walk(t[keys[0]], keys[1:])
		}
		return nil
	}
	return walk(v, keys)
}

var wantHives = []string{"DEFAULT", "SAM", "SECURITY", "SOFTWARE", "SYSTEM"}

func verifyLayer(layerTar []byte, want buildOptions) error {
	seenDirs := map[string]bool{".": true}
	seen := map[string]bool{}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(layerTar))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name, attr, err := checkEntry(h, seen, seenDirs)
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if attr&fileAttrDirectoryBit == 0 {
				return fmt.Errorf("entry %s: a directory whose %s %d lacks FILE_ATTRIBUTE_DIRECTORY (it would be created as a file)", name, paxFileAttr, attr)
			}
			seenDirs[name] = true
		case tar.TypeReg:
			if attr&fileAttrDirectoryBit != 0 {
				return fmt.Errorf("entry %s: a file with FILE_ATTRIBUTE_DIRECTORY in %s", name, paxFileAttr)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return fmt.Errorf("entry %s: %w", name, err)
			}
			files[name] = data
		default:
			return fmt.Errorf("entry %s: type %q; only directories and regular files", name, h.Typeflag)
		}
	}
	return checkFiles(files, want)
}

// checkEntry checks one entry's header as the base-layer import reads it
// (a clean path under Files/, once, after its directory, PAX records with
// attributes, times and a security descriptor); it returns the entry's
// name and FILE_ATTRIBUTE bits.
func checkEntry(h *tar.Header, seen, seenDirs map[string]bool) (string, uint64, error) {
	name := strings.TrimSuffix(h.Name, "/")
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || strings.Contains(name, ":") ||
		path.Clean(name) != name || strings.HasPrefix(name, "../") {
		return "", 0, fmt.Errorf("entry %q: not a clean relative path", h.Name)
	}
	if name == "Hives" || strings.HasPrefix(name, "Hives/") {
		return "", 0, fmt.Errorf("entry %s: a base layer has no Hives/ (the import derives it from Files/Windows/System32/config)", name)
	}
	if name != "Files" && !strings.HasPrefix(name, "Files/") {
		return "", 0, fmt.Errorf("entry %s: not under Files/ (Windows imports only Files/ and UtilityVM/ of a base layer)", name)
	}
	if strings.HasPrefix(path.Base(name), ".wh.") {
		return "", 0, fmt.Errorf("entry %s: a whiteout; a base layer cannot have one", name)
	}
	if seen[name] {
		return "", 0, fmt.Errorf("entry %s: twice (the import creates each entry with FILE_CREATE)", name)
	}
	seen[name] = true
	if !seenDirs[path.Dir(name)] {
		return "", 0, fmt.Errorf("entry %s: comes before its directory %s (the import does not create parents)", name, path.Dir(name))
	}
	if h.Format != tar.FormatPAX {
		return "", 0, fmt.Errorf("entry %s: %v header, want PAX", name, h.Format)
	}
	attr, err := strconv.ParseUint(h.PAXRecords[paxFileAttr], 10, 32)
	if err != nil {
		return "", 0, fmt.Errorf("entry %s: %s %q: %v", name, paxFileAttr, h.PAXRecords[paxFileAttr], err)
	}
	if _, err := strconv.ParseInt(h.PAXRecords[paxCreationTime], 10, 64); err != nil {
		return "", 0, fmt.Errorf("entry %s: %s %q: %v", name, paxCreationTime, h.PAXRecords[paxCreationTime], err)
	}
	if !h.AccessTime.Equal(h.ModTime) || !h.ChangeTime.Equal(h.ModTime) {
		return "", 0, fmt.Errorf("entry %s: atime %v, ctime %v, mtime %v differ", name, h.AccessTime, h.ChangeTime, h.ModTime)
	}
	if name != "Files" {
		if err := checkSecurityDescriptor(h.PAXRecords[paxRawSD]); err != nil {
			return "", 0, fmt.Errorf("entry %s: %s: %w", name, paxRawSD, err)
		}
	}
	return name, attr, nil
}

// checkFiles wants the five registry hives and the entrypoint (want.exe when set).
func checkFiles(files map[string][]byte, want buildOptions) error {
	for _, hv := range wantHives {
		name := "Files/Windows/System32/config/" + hv
		data, ok := files[name]
		if !ok {
			return fmt.Errorf("no %s (Windows validates the five hives when it imports a base layer)", name)
		}
		if err := checkHive(data); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if want.exeName != "" {
		name := "Files/" + want.exeName
		data, ok := files[name]
		if !ok {
			return fmt.Errorf("no %s (the entrypoint)", name)
		}
		if want.exe != nil && !bytes.Equal(data, want.exe) {
			return fmt.Errorf("%s: %d bytes, sha256 %s; want %d bytes, sha256 %s", name, len(data), sha256Digest(data), len(want.exe), sha256Digest(want.exe))
		}
	}
	return nil
}

const fileAttrDirectoryBit = 0x10

// checkSecurityDescriptor wants a self-relative descriptor with a DACL: one
// without (go-containerregistry's O:BUG:BU) grants everyone full control.
func checkSecurityDescriptor(b64 string) error {
	if b64 == "" {
		return errors.New("missing")
	}
	sd, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return err
	}
	if len(sd) < 20 || sd[0] != 1 {
		return fmt.Errorf("not a security descriptor (%d bytes)", len(sd))
	}
	control := binary.LittleEndian.Uint16(sd[2:4])
	const selfRelative, daclPresent = 0x8000, 0x0004
	if control&selfRelative == 0 {
		return errors.New("not self-relative")
	}
	if control&daclPresent == 0 || binary.LittleEndian.Uint32(sd[16:20]) == 0 {
		return errors.New("no DACL: everyone would get full control")
	}
	return nil
}

// checkHive checks a registry hive's base block: the regf signature, the
// XOR checksum of its first 508 bytes, and a length that matches the size of
// its hive bins (the header of a real hive, which ProcessBaseLayer loads on
// Windows Server 2025).
func checkHive(b []byte) error {
	if len(b) < 4096 || string(b[:4]) != "regf" {
		return fmt.Errorf("not a registry hive (%d bytes)", len(b))
	}
	var sum uint32
	for i := 0; i < 508; i += 4 {
		sum ^= binary.LittleEndian.Uint32(b[i:])
	}
	if want := binary.LittleEndian.Uint32(b[508:]); sum != want {
		return fmt.Errorf("base block checksum %#x, header says %#x", sum, want)
	}
	if bins := binary.LittleEndian.Uint32(b[0x28:]); int(bins)+4096 != len(b) || bins == 0 {
		return fmt.Errorf("hive bins of %d bytes, file of %d", bins, len(b))
	}
	if got := hex.EncodeToString(sha256Sum(b)); got != emptyHiveSHA256 {
		return fmt.Errorf("sha256 %s, not the empty hive of Microsoft's HostProcess base image", got)
	}
	return nil
}

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
