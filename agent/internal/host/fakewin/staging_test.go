package fakewin_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/host/fakewin"
)

// A servicing task of an earlier start that still runs (the operator timed
// the node out and put it back while DISM worked) is never raced: the ask
// starts no staging while the task's result says Running, and the next ask
// once it ended downloads.
func TestNothingIsStagedWhileAServicingTaskRuns(t *testing.T) {
	m, h := boot(t, aks(fakewin.Catalogue{DownloadTime: 20 * time.Millisecond}))
	result := m.Path(`C:\ProgramData\winpool\servicing\result.json`)
	if err := os.MkdirAll(filepath.Dir(result), 0o700); err != nil {
		t.Fatal(err)
	}
	running := `{"revision": "r0", "attempt": 1, "target": "10.0.20348.2762", "phase": "Running", "started": "` + time.Now().UTC().Format(time.RFC3339) + `"}`
	if err := os.WriteFile(result, []byte(running), 0o600); err != nil {
		t.Fatal(err)
	}
	req := host.UpdateRequest{Revision: "r1", Target: target, Source: config.SourceWindowsUpdate}
	if s := h.Stage(context.Background(), req); s.Phase != host.StageRunning || s.Done != nil {
		t.Fatalf("staging %+v beside a running servicing task, want none started (no Done channel)", s)
	}
	if err := os.WriteFile(result, []byte(strings.Replace(running, `"Running"`, `"Done"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := h.Stage(context.Background(), req)
	if s.Done == nil {
		t.Fatalf("staging %+v once the task ended, want one started", s)
	}
	<-s.Done
	if s = h.Stage(context.Background(), req); s.Phase != host.StageDone || m.Stats().UpdateDownloads != 1 {
		t.Errorf("staging %+v with %d downloads, want Staged after one", s, m.Stats().UpdateDownloads)
	}
}
