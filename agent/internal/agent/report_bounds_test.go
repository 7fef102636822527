package agent

import (
	"strings"
	"testing"
	"unicode/utf8"
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
