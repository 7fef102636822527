//go:build windows

package windows

import (
	"context"
	"testing"
	"time"
)

// DISM's real listing of this machine's packages (read-only; the runner
// runs as an administrator, as the servicing task does): it names the
// cumulative update packages as the removal reads them, and the one of the
// build the machine runs is found when it is listed Installed.
func TestTheRealDISMListsCumulativeUpdatesAsTheRemovalReadsThem(t *testing.T) {
	m := windowsMachine()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	table, code, err := dismRunner{m}.Packages(ctx)
	if err != nil || code != 0 {
		t.Fatalf("DISM /Get-Packages: exit %d, %v", code, err)
	}
	running, err := readBuild(m.System)
	if err != nil {
		t.Fatal(err)
	}
	name, listed := cumulativePackage(table, running)
	if len(listed) == 0 {
		t.Fatalf("no Package_for_RollupFix in DISM's listing (a patched image has its cumulative update as one):\n%s", table)
	}
	t.Logf("running %s; cumulative update packages: %v; the removal would take %q", running, listed, name)
}
