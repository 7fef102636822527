// Command wincheck imports the agent image's layer on Windows the way a
// node does, and checks what lands on disk. It runs in the Windows workflow
// (.github/workflows/windows.yml), on a real Windows Server:
//
//	wincheck winpool-agent.oci.tar [winpool-agent.exe]
//
// With the executable given, the imported entrypoint must hold its bytes.
//
// containerd's Windows snapshotter applies a layer with hcsshim's
// ociwclayer.ImportLayerFromTar (containerd plugins/diff/windows); an image's
// first layer has no parents, so hcsshim writes it with its base layer
// writer and then runs ProcessBaseLayer, which reads the registry hives. This
// calls the same function (hcsshim, pinned in this tool's go.mod; the agent
// itself links only hnslib, for hcn), so a layer that hack/tools/winimage's checks accept but Windows refuses
// fails here.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/Microsoft/go-winio"
	"github.com/Microsoft/hcsshim/pkg/ociwclayer"
)

type descriptor struct {
	Digest string `json:"digest"`
}

func main() {
	if len(os.Args) != 2 && len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: wincheck ARCHIVE.oci.tar [EXE]")
		os.Exit(2)
	}
	exePath := ""
	if len(os.Args) == 3 {
		exePath = os.Args[2]
	}
	if err := run(os.Args[1], exePath); err != nil {
		fmt.Fprintln(os.Stderr, "wincheck:", err)
		os.Exit(1)
	}
	fmt.Println("wincheck: ok")
}

func run(archivePath, exePath string) error {
	layerGz, entrypoint, err := firstLayer(archivePath)
	if err != nil {
		return err
	}
	// containerd enables the same two privileges before applying a layer.
	if err := winio.EnableProcessPrivileges([]string{winio.SeBackupPrivilege, winio.SeRestorePrivilege}); err != nil {
		return fmt.Errorf("backup/restore privileges (run elevated): %w", err)
	}
	tmp, err := os.MkdirTemp("", "wincheck")
	if err != nil {
		return err
	}
	layerDir := filepath.Join(tmp, "layer")
	zr, err := gzip.NewReader(bytes.NewReader(layerGz))
	if err != nil {
		return err
	}
	size, err := ociwclayer.ImportLayerFromTar(context.Background(), zr, layerDir, nil)
	if err != nil {
		return fmt.Errorf("ImportLayerFromTar (base layer): %w", err)
	}
	fmt.Printf("imported %d bytes of files into %s\n", size, layerDir)

	// A HostProcess container's entrypoint is looked up in the image's
	// folder, the layer's Files.
	got, err := os.ReadFile(filepath.Join(layerDir, "Files", entrypoint))
	if err != nil {
		return fmt.Errorf("the entrypoint after import: %w", err)
	}
	if exePath != "" {
		exe, err := os.ReadFile(exePath)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, exe) {
			return fmt.Errorf("Files\\%s holds %d bytes, not the %d of %s", entrypoint, len(got), len(exe), exePath)
		}
	}
	for _, hive := range []string{"DEFAULT", "SAM", "SECURITY", "SOFTWARE", "SYSTEM"} {
		if _, err := os.Stat(filepath.Join(layerDir, `Files\Windows\System32\config`, hive)); err != nil {
			return err
		}
	}
	// What ProcessBaseLayer added next to Files (Hives\*_BASE and the base
	// VHDs in the layers seen so far), for the log: the layer itself has no
	// Hives directory.
	return filepath.WalkDir(layerDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(layerDir, p)
		if strings.HasPrefix(rel, `Files\`) && strings.Count(rel, `\`) > 1 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Printf("  %-45s %10d %s\n", rel, info.Size(), info.Mode())
		return nil
	})
}

// firstLayer reads index.json -> manifest -> the layer blob, and the
// config's entrypoint.
func firstLayer(archivePath string) (layer []byte, entrypoint string, err error) {
	f, err := os.Open(archivePath)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", err
		}
		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(tr); err != nil {
				return nil, "", err
			}
		}
	}
	blob := func(digest string) ([]byte, error) {
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
		if !ok {
			return nil, fmt.Errorf("no blob %s", digest)
		}
		return b, nil
	}
	var index struct{ Manifests []descriptor }
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return nil, "", fmt.Errorf("index.json: want one manifest (%v)", err)
	}
	mb, err := blob(index.Manifests[0].Digest)
	if err != nil {
		return nil, "", err
	}
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(mb, &manifest); err != nil || len(manifest.Layers) != 1 {
		return nil, "", fmt.Errorf("manifest: want one layer (%v)", err)
	}
	cb, err := blob(manifest.Config.Digest)
	if err != nil {
		return nil, "", err
	}
	var config struct{ Config struct{ Entrypoint []string } }
	if err := json.Unmarshal(cb, &config); err != nil || len(config.Config.Entrypoint) != 1 {
		return nil, "", fmt.Errorf("config: want one Entrypoint (%v)", err)
	}
	layer, err = blob(manifest.Layers[0].Digest)
	return layer, config.Config.Entrypoint[0], err
}
