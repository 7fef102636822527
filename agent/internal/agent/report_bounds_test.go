package agent

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"winpool.dev/agent/internal/host"
)

// What the agent writes into its report fits the report CRD's bounds
// (src/api/report.rs: apply.message and each preflight line at most 2048
// characters, at most 32 preflight lines): a write past them is refused whole
// and the operator would never see the report.
func TestReportLinesFitTheCRDsBounds(t *testing.T) {
	const crdMaxLength, crdMaxItems = 2048, 32
	long := strings.Repeat("servicing failed: 0x800f0922 ", 500)
	if n := utf8.RuneCountInString(oneLine(long)); n > crdMaxLength {
		t.Errorf("a message of %d characters, the CRD allows %d", n, crdMaxLength)
	}
	wide := strings.Repeat("é", 5000)
	if got := oneLine(wide); !utf8.ValidString(got) || utf8.RuneCountInString(got) > crdMaxLength {
		t.Errorf("multi-byte message cut to %d characters, valid UTF-8 %v", utf8.RuneCountInString(got), utf8.ValidString(got))
	}
	many := make([]string, 100)
	for i := range many {
		many[i] = long
	}
	got := bounded(many)
	if len(got) != crdMaxItems || got[len(got)-1] != "and 69 more" {
		t.Errorf("%d lines, last %q; want %d ending in the count left out", len(got), got[len(got)-1], crdMaxItems)
	}
	for _, l := range got {
		if utf8.RuneCountInString(l) > crdMaxLength {
			t.Errorf("a line of %d characters", utf8.RuneCountInString(l))
		}
	}
	if b := bounded([]string{"a", "b"}); len(b) != 2 || b[1] != "b" {
		t.Errorf("a short list changed: %q", b)
	}
}

// What was installed fits the CRD's bounds on apply.installed (at most 64
// updates, each named, at most 256 CVE IDs of at most 64 characters each).
func TestTheInstalledRecordFitsTheCRDsBounds(t *testing.T) {
	cves := make([]string, 300)
	for i := range cves {
		cves[i] = fmt.Sprintf("CVE-2026-%05d", i)
	}
	cves[0] = strings.Repeat("CVE-", 20)
	list := []host.InstalledUpdate{{KB: " "}, {KB: "KB5050002", Title: "2026-12 Cumulative Update", CveIDs: cves}}
	for i := range 100 {
		list = append(list, host.InstalledUpdate{KB: fmt.Sprintf("package-%d.msu", i)})
	}
	got := installedRecord(list)
	if len(got) != 64 || got[0].KB != "KB5050002" || got[1].KB != "package-0.msu" {
		t.Fatalf("%d updates recorded, the first %q; want 64, the unnamed one left out, in their order", len(got), got[0].KB)
	}
	if ids := got[0].CveIDs; len(ids) != 256 || ids[0] != "CVE-2026-00001" {
		t.Errorf("%d CVE IDs, the first %q; want 256 with the one longer than 64 characters left out", len(ids), ids[0])
	}
	if installedRecord(nil) != nil {
		t.Error("nothing installed is no list")
	}
}
