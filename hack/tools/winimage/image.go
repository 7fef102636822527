package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"

	// containerd's import names an image by this annotation, and falls back
	// to org.opencontainers.image.ref.name prefixed with --base-name
	// (containerd client/import.go, imageName).
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// platform has no os.version on purpose: containerd matches an image without
// one on every Windows build, and one with a build number only on hosts of
// that LTSC line (containerd/platforms platform_windows_compat.go,
// windowsVersionMatcher.Match). A HostProcess container runs on the host's
// own OS, so it must not be pinned to one (Microsoft's base image dropped it
// for that reason: windows-host-process-containers-base-image commit d3e3f82).
type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        descriptor        `json:"config"`
	Layers        []descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type imageConfig struct {
	Created      string          `json:"created"`
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Config       containerConfig `json:"config"`
	RootFS       rootFS          `json:"rootfs"`
	History      []history       `json:"history"`
}

type containerConfig struct {
	Env        []string          `json:"Env,omitempty"`
	Entrypoint []string          `json:"Entrypoint"`
	Labels     map[string]string `json:"Labels,omitempty"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type history struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

type buildOptions struct {
	exeName string
	exe     []byte
	ref     string // repository:tag
	labels  map[string]string
	env     []string
	epoch   time.Time
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// gzipBytes compresses without a file name or time in the gzip header, so
// the same layer gives the same blob.
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tagOf splits repository:tag; a port in the registry host is not a tag.
func tagOf(ref string) (string, error) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i+1:], "/") || ref[i+1:] == "" {
		return "", fmt.Errorf("image reference %q has no tag", ref)
	}
	return ref[i+1:], nil
}

// buildArchive is the whole build: o's layer, then the image around it.
func buildArchive(o buildOptions) ([]byte, error) {
	entries, err := layerEntries(o.exeName, o.exe)
	if err != nil {
		return nil, err
	}
	layerTar, err := writeLayer(entries, o.epoch)
	if err != nil {
		return nil, err
	}
	return buildImage(o, layerTar)
}

// buildImage writes the OCI image layout archive around an uncompressed
// layer tar.
func buildImage(o buildOptions, layerTar []byte) ([]byte, error) {
	tag, err := tagOf(o.ref)
	if err != nil {
		return nil, err
	}
	layerGz, err := gzipBytes(layerTar)
	if err != nil {
		return nil, err
	}
	created := o.epoch.UTC().Format(time.RFC3339)
	cfg := imageConfig{
		Created:      created,
		Architecture: "amd64",
		OS:           "windows",
		Config: containerConfig{
			Env:        o.env,
			Entrypoint: []string{o.exeName},
			Labels:     o.labels,
		},
		RootFS: rootFS{Type: "layers", DiffIDs: []string{sha256Digest(layerTar)}},
		History: []history{{
			Created:   created,
			CreatedBy: "hack/tools/winimage: " + o.exeName + " and the registry hives of a Windows base layer",
		}},
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	man := manifest{
		SchemaVersion: 2,
		MediaType:     mediaTypeManifest,
		Config:        descriptor{MediaType: mediaTypeConfig, Digest: sha256Digest(cfgJSON), Size: int64(len(cfgJSON))},
		Layers:        []descriptor{{MediaType: mediaTypeLayerGz, Digest: sha256Digest(layerGz), Size: int64(len(layerGz))}},
		Annotations:   o.labels,
	}
	manJSON, err := json.Marshal(man)
	if err != nil {
		return nil, err
	}
	idx := index{
		SchemaVersion: 2,
		MediaType:     mediaTypeIndex,
		Manifests: []descriptor{{
			MediaType: mediaTypeManifest,
			Digest:    sha256Digest(manJSON),
			Size:      int64(len(manJSON)),
			Platform:  &platform{Architecture: "amd64", OS: "windows"},
			Annotations: map[string]string{
				annotationContainerdName: o.ref,
				annotationRefName:        tag,
			},
		}},
	}
	idxJSON, err := json.Marshal(idx)
	if err != nil {
		return nil, err
	}
	return layoutTar(o, idxJSON, [][]byte{cfgJSON, manJSON, layerGz})
}

// layoutTar is the OCI image layout as a tar: oci-layout, index.json and
// each blob under blobs/sha256/, directories first, every time the epoch.
func layoutTar(o buildOptions, idxJSON []byte, blobs [][]byte) ([]byte, error) {
	files := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json": idxJSON,
	}
	for _, blob := range blobs {
		files["blobs/sha256/"+strings.TrimPrefix(sha256Digest(blob), "sha256:")] = blob
	}
	names := []string{"blobs", "blobs/sha256"}
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names {
		h := &tar.Header{Name: name, ModTime: o.epoch, Format: tar.FormatPAX}
		data, isFile := files[name]
		if isFile {
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(data))
		} else {
			h.Typeflag, h.Mode, h.Name = tar.TypeDir, 0o755, name+"/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if isFile {
			if _, err := tw.Write(data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
