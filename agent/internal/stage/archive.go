package stage

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ContainerdBinaries are the files a containerd Windows release archive
// holds under bin/ that the upgrade replaces; containerd.exe must be there.
// Nothing else is touched, config.toml included (it holds the CNI settings).
var ContainerdBinaries = []string{"containerd.exe", "containerd-shim-runhcs-v1.exe", "ctr.exe", "containerd-stress.exe"}

// ExtractContainerd unpacks the executables of a containerd release
// archive (containerd-<v>-windows-amd64.tar.gz: bin/containerd.exe, …) into
// dir, and returns the names it wrote. Only known names under bin/ are
// taken, so no path in the archive can write outside dir.
func ExtractContainerd(archive, dir string) ([]string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s is not a gzip archive: %w", archive, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	wanted := map[string]bool{}
	for _, b := range ContainerdBinaries {
		wanted[b] = true
	}
	var wrote []string
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", archive, err)
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		base := path.Base(name)
		if hdr.Typeflag != tar.TypeReg || path.Dir(name) != "bin" || !wanted[base] {
			continue
		}
		if err := WriteFile(filepath.Join(dir, base), tr, 0o700, false); err != nil {
			return nil, err
		}
		wrote = append(wrote, base)
	}
	for _, w := range wrote {
		if w == "containerd.exe" {
			return wrote, nil
		}
	}
	return nil, fmt.Errorf("%s has no bin/containerd.exe: not a containerd Windows release archive", archive)
}

// ContainerdReleases is where containerd publishes its releases.
const ContainerdReleases = "https://github.com/containerd/containerd/releases/download"

// OfficialContainerdFrom is the release archive of containerd version v and
// its published sha256sum, as containerd's GitHub releases (releases:
// ContainerdReleases, or a mirror or test server laid out the same way)
// name them.
func OfficialContainerdFrom(releases, v string) (archive, sha256sum string) {
	v = strings.TrimPrefix(v, "v")
	archive = fmt.Sprintf("%s/v%s/containerd-%s-windows-amd64.tar.gz", strings.TrimSuffix(releases, "/"), v, v)
	return archive, archive + ".sha256sum"
}
