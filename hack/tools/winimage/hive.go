package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
)

// emptyHiveGzip is the empty registry hive Microsoft's HostProcess base image
// ships as each of Files/Windows/System32/config/{DEFAULT,SAM,SECURITY,
// SOFTWARE,SYSTEM}: $DEFAULT_HIVE in New-HostProcessBaseImage.ps1 of
// github.com/microsoft/windows-host-process-containers-base-image (MIT; the
// image content is CC0), commit d7c1101 "use single hive template". Windows
// validates these five files when it imports a base layer (ProcessBaseLayer),
// and since Windows Server 2025 they must be real hives, not empty files
// (that repository's commit 2ac6fdd). Stored gzipped (it is 8 KiB, mostly
// zeros) and checked against the upstream file's SHA-256 when decoded.
const emptyHiveGzip = `
H4sIAAAAAAACA+3Yv0rDUBQG8C/VgDioFQUHhz6AroIiSKHJYgeHFh2KwT+xLSUlpKlUEHHS4uSo
ZvEFdPFBtLubg2N9g3hucqtSHV3E7wfJObn3nCSULjmBWz3IAFDHdi/fKrvPhiH5CFIqz6lkKs09
7KAKFxWEcvbgw0ENdRzKVUtyFx3ZCaRqT2IFBViwkUcZRZSk/+buvm/33rJni9fjD6v99vC1elQ0
tBZ4oTd4N9CveWlvXvBXICIiIiIi+h9qu/Um9Pf9wNdv7as4jpuNhY81NScYW/qsjbVB3tXxp2dl
5Si5nm95fnjkFCw7Xy6W9N6W9LQagOrv6rnDZRJHT/clhrpuJplVbOj5xBzWMInkpQBTzSlymbQq
WU+nBeZ0EuaxLJ1G2mia+n4rUfSt30g3zVk53bqPJ531yHk9PvdV3dME/zNERERERET097wDzo02
JgAgAAA=`

// emptyHiveSHA256 is the SHA-256 of the decoded upstream hive (8192 bytes).
const emptyHiveSHA256 = "d4b4cf215e6e102780ad2bf08bf73177ab56a204b342219dc6fbcb1a48cad1ee"

// hiveNames are the hives ProcessBaseLayer (and hcsshim's CimFS importer,
// internal/wclayer/cim/common.go) expect under Files/Windows/System32/config
// of a base layer.
var hiveNames = []string{"DEFAULT", "SAM", "SECURITY", "SOFTWARE", "SYSTEM"}

func emptyHive() ([]byte, error) {
	gz, err := base64.StdEncoding.DecodeString(string(bytes.ReplaceAll([]byte(emptyHiveGzip), []byte("\n"), nil)))
	if err != nil {
		return nil, fmt.Errorf("empty hive: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("empty hive: %w", err)
	}
	hive, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("empty hive: %w", err)
	}
	sum := sha256.Sum256(hive)
	if got := hex.EncodeToString(sum[:]); got != emptyHiveSHA256 {
		return nil, fmt.Errorf("empty hive: sha256 %s, want %s", got, emptyHiveSHA256)
	}
	return hive, nil
}
