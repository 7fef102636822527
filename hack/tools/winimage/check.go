package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// checkOptions are what a release promises of an image of any platform
// (the operator's Linux images): `winimage check` reads it back. The agent's
// Windows image has the stricter verify, which build runs on what it wrote.
type checkOptions struct {
	platform   string // os/arch
	entrypoint string
	user       string // "" = not checked
	files      []string
}

// check reads an OCI image archive back: index.json -> its one manifest ->
// config and layers, every blob's digest (readLayout) and size (blob) as
// the references say, the config's diff_ids those of the layers, the
// platform, the entrypoint and the user, and paths that must be in some
// layer. Every problem is named; a blob that is not what its reference says
// is not read further.
func check(archive []byte, want checkOptions) []string {
	blobs, meta, err := readLayout(archive)
	if err != nil {
		return []string{err.Error()}
	}
	var idx index
	if err := json.Unmarshal(meta["index.json"], &idx); err != nil {
		return []string{fmt.Sprintf("index.json: %v", err)}
	}
	if len(idx.Manifests) != 1 {
		return []string{fmt.Sprintf("index.json lists %d manifests, want 1", len(idx.Manifests))}
	}
	var man manifest
	if err := readJSON(blobs, idx.Manifests[0], &man); err != nil {
		return []string{fmt.Sprintf("manifest: %v", err)}
	}
	var cfg struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Config       struct {
			Entrypoint []string `json:"Entrypoint"`
			User       string   `json:"User"`
		} `json:"config"`
		RootFS rootFS `json:"rootfs"`
	}
	if err := readJSON(blobs, man.Config, &cfg); err != nil {
		return []string{fmt.Sprintf("config: %v", err)}
	}
	var problems []string
	if got := cfg.OS + "/" + cfg.Architecture; got != want.platform {
		problems = append(problems, fmt.Sprintf("platform %s, want %s", got, want.platform))
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{want.entrypoint}) {
		problems = append(problems, fmt.Sprintf("entrypoint %q, want [%q]", cfg.Config.Entrypoint, want.entrypoint))
	}
	if want.user != "" && cfg.Config.User != want.user {
		problems = append(problems, fmt.Sprintf("user %q, want %q", cfg.Config.User, want.user))
	}
	var diffIDs []string
	names := map[string]bool{}
	for i, l := range man.Layers {
		plain, err := layerTarOf(blobs, l)
		if err == nil {
			err = tarNames(plain, names)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("layer %d: %v", i, err))
			continue
		}
		diffIDs = append(diffIDs, sha256Digest(plain))
	}
	if !slices.Equal(diffIDs, cfg.RootFS.DiffIDs) {
		problems = append(problems, fmt.Sprintf("config diff_ids %v are not the layers' %v", cfg.RootFS.DiffIDs, diffIDs))
	}
	for _, f := range want.files {
		if !names[strings.TrimPrefix(f, "/")] {
			problems = append(problems, fmt.Sprintf("%s is in no layer", f))
		}
	}
	return problems
}

func readJSON(blobs map[string][]byte, d descriptor, v any) error {
	b, err := blob(blobs, d)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// layerTarOf is a layer's tar, gunzipped when its media type says so.
func layerTarOf(blobs map[string][]byte, d descriptor) ([]byte, error) {
	b, err := blob(blobs, d)
	if err != nil || !strings.HasSuffix(d.MediaType, "+gzip") {
		return b, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// tarNames adds the paths a layer's tar holds to names.
func tarNames(layer []byte, names map[string]bool) error {
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not a readable tar: %w", err)
		}
		names[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = true
	}
}

func checkCmd(args []string) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	var o checkOptions
	fs.StringVar(&o.platform, "platform", "", "os/arch the config must name")
	fs.StringVar(&o.entrypoint, "entrypoint", "", "the one Entrypoint element the config must have")
	fs.StringVar(&o.user, "user", "", "the user the config must run as (default: not checked)")
	var files keyValues
	fs.Func("file", "a path some layer must hold (repeatable)", func(v string) error { files = append(files, v); return nil })
	_ = fs.Parse(args)
	if o.platform == "" || o.entrypoint == "" || fs.NArg() != 1 {
		return fmt.Errorf("check needs -platform, -entrypoint and one archive")
	}
	o.files = files
	archive, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	if problems := check(archive, o); len(problems) > 0 {
		return fmt.Errorf("%s:\n  %s", fs.Arg(0), strings.Join(problems, "\n  "))
	}
	fmt.Printf("%s: ok (%s, entrypoint %s, user %q)\n", fs.Arg(0), o.platform, o.entrypoint, o.user)
	return nil
}
