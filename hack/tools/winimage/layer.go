package main

import (
	"archive/tar"
	"bytes"
	"path"
	"sort"
	"strconv"
	"time"
)

// The layer is a Windows *base* layer: the image has no parent, so
// containerd's Windows snapshotter imports it with hcsshim's
// ociwclayer.ImportLayerFromTar and no parent layers, which picks the base
// layer writer (internal/wclayer/baselayerwriter.go) and then runs
// ProcessBaseLayer. What that needs, and why each header looks as it does:
//
//   - Everything under Files/. The writer creates each entry at its tar path
//     below the snapshot directory, and Windows sees Files/ as the container's
//     C:\ (a HostProcess container's image folder). No Hives/: in a base layer
//     the import derives Hives/*_BASE from Files/Windows/System32/config
//     itself (hcsshim internal/wclayer/cim/process.go makes the directory with
//     os.Mkdir), and hcsshim's own export of a base layer
//     (internal/wclayer/baselayerreader.go) walks only Files/ and UtilityVM/.
//     Microsoft's HostProcess base image (a one-layer scratch image like this
//     one) holds only Files/. Layers *above* a base (BuildKit's, ko's) carry an
//     empty Hives/ for registry deltas; a base layer has none to carry.
//   - The five registry hives (hive.go), which ProcessBaseLayer validates.
//   - Parents before children and no entry twice: each entry is created with
//     NtCreateFile(FILE_CREATE) relative to the layer root
//     (internal/safefile/safeopen.go), which neither makes missing parents nor
//     replaces an existing file. Sorting the paths gives that order.
//   - PAX headers with MSWINDOWS.fileattr and LIBARCHIVE.creationtime, as
//     BuildKit writes Windows layers from Linux (moby/buildkit
//     util/winlayers/differ.go, prepareWinHeader): 16 (DIRECTORY) for
//     directories, 32 (ARCHIVE) for files. go-winio's backuptar.
//     FileInfoFromHeader takes the attributes from that record when present
//     and the base layer writer creates a directory only if bit 16 is set, so
//     a directory header without it would become a file.
//   - atime and ctime equal to mtime: FileInfoFromHeader reads all three, and
//     a zero Go time would stamp the files with 1754.
//   - MSWINDOWS.rawsd on everything below Files/: BuildKit's descriptors,
//     O:BAG:SY with full control for Administrators and SYSTEM and read and
//     execute for Users (inheritable on directories). Without one a file
//     inherits the snapshot directory's ACL; go-containerregistry's Windows
//     conversion (ko) writes O:BUG:BU *without a DACL*, which grants everyone
//     full control, including writing an executable that runs as SYSTEM.
//   - Only directories and regular files: no whiteouts (the base layer writer
//     refuses them), links or symlinks.
const (
	fileAttrDirectory = 16 // FILE_ATTRIBUTE_DIRECTORY
	fileAttrArchive   = 32 // FILE_ATTRIBUTE_ARCHIVE

	// O:BAG:SYD:(A;OICI;FA;;;BA)(A;OICI;FA;;;SY)(A;;FA;;;BA)(A;OICIIO;GA;;;CO)(A;OICI;0x1200a9;;;BU)(A;CI;LC;;;BU)(A;CI;DC;;;BU)
	dirSecurityDescriptor = "AQAEgBQAAAAkAAAAAAAAADAAAAABAgAAAAAABSAAAAAgAgAAAQEAAAAAAAUSAAAAAgCoAAcAAAAAAxgA/wEfAAECAAAAAAAFIAAAACACAAAAAxQA/wEfAAEBAAAAAAAFEgAAAAAAGAD/AR8AAQIAAAAAAAUgAAAAIAIAAAALFAAAAAAQAQEAAAAAAAMAAAAAAAMYAKkAEgABAgAAAAAABSAAAAAhAgAAAAIYAAQAAAABAgAAAAAABSAAAAAhAgAAAAIYAAIAAAABAgAAAAAABSAAAAAhAgAA"
	// O:BAG:SYD:(A;;FA;;;BA)(A;;FA;;;SY)(A;;0x1200a9;;;BU)
	fileSecurityDescriptor = "AQAEgBQAAAAkAAAAAAAAADAAAAABAgAAAAAABSAAAAAgAgAAAQEAAAAAAAUSAAAAAgBMAAMAAAAAABgA/wEfAAECAAAAAAAFIAAAACACAAAAABQA/wEfAAEBAAAAAAAFEgAAAAAAGACpABIAAQIAAAAAAAUgAAAAIQIAAA=="

	paxFileAttr     = "MSWINDOWS.fileattr"
	paxRawSD        = "MSWINDOWS.rawsd"
	paxCreationTime = "LIBARCHIVE.creationtime"
)

// entry is one file or directory of the layer, named by its path in the
// tar (slash-separated, no trailing slash).
type entry struct {
	name string
	dir  bool
	data []byte
}

// layerEntries lists the layer's content: the hives and the executable under
// Files/, with every directory on the way.
func layerEntries(exeName string, exe []byte) ([]entry, error) {
	hive, err := emptyHive()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"Files/" + exeName: exe}
	for _, h := range hiveNames {
		files["Files/Windows/System32/config/"+h] = hive
	}
	dirs := map[string]bool{}
	var entries []entry
	for name, data := range files {
		entries = append(entries, entry{name: name, data: data})
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if !dirs[d] {
				dirs[d] = true
				entries = append(entries, entry{name: d, dir: true})
			}
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	return entries, nil
}

// writeLayer writes entries, in their order, as an uncompressed Windows
// layer tar with every time set to epoch.
func writeLayer(entries []entry, epoch time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:       e.name,
			ModTime:    epoch,
			AccessTime: epoch,
			ChangeTime: epoch,
			Format:     tar.FormatPAX,
			PAXRecords: map[string]string{paxCreationTime: strconv.FormatInt(epoch.Unix(), 10)},
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
			h.Mode = 0o755 | 0o40000 // c_ISDIR, as BuildKit sets it
			h.PAXRecords[paxFileAttr] = strconv.Itoa(fileAttrDirectory)
		} else {
			h.Typeflag = tar.TypeReg
			h.Mode = 0o755 | 0o100000 // c_ISREG
			h.Size = int64(len(e.data))
			h.PAXRecords[paxFileAttr] = strconv.Itoa(fileAttrArchive)
		}
		// The top directory gets no descriptor, as in BuildKit's layers: it
		// is the snapshot's own Files folder, owned by the snapshotter.
		if e.name != "Files" {
			if e.dir {
				h.PAXRecords[paxRawSD] = dirSecurityDescriptor
			} else {
				h.PAXRecords[paxRawSD] = fileSecurityDescriptor
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if !e.dir {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
