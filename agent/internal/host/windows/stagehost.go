package windows

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
)

// Staging (Host.Stage) downloads, while the node still serves, what the
// install will take, so the node is out of service for the install and the
// reboot only. It runs in the agent's process, not in a SYSTEM task as the
// install does: a download cut by the pod's end loses nothing (Windows
// Update keeps partial content in SoftwareDistribution and BITS resumes it;
// a package is used only once its sha256 matches), and nothing is installed.
// The install (a task, later) downloads again only what is gone or no longer
// matches: Windows Update's Download of an update whose content is there
// returns at once, and a package is fetched only if its file fails its digest.

// stageKeepFree is what staging leaves free on the system drive beyond what
// it downloads: the install expands the payload and backs up the component
// store (decide.MinFreeBytes in all, of which the download is part).
const stageKeepFree = decide.MinFreeBytes / 2

// stagings holds the one staging there is: the pending revision's.
type stagings struct {
	mu  sync.Mutex
	cur *stageRun
}

type stageRun struct {
	rev    string
	cancel context.CancelFunc
	done   chan struct{}
	result host.Staging
	// told: the failure was returned to an ask (the next one starts over).
	told bool
}

// Stage starts staging req's update on the first ask for its revision (and
// again on the ask after the one told it failed: the agent paces those), ending the
// staging of any other revision, and says how far it is.
func (h *Host) Stage(_ context.Context, req host.UpdateRequest) host.Staging {
	s := &h.stagings
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.cur; r != nil && r.rev == req.Revision {
		if r.result.Phase != host.StageFailed || !r.told {
			r.told = r.result.Phase == host.StageFailed
			return r.result
		}
	}
	// Never beside a servicing task that still runs (an install the
	// operator timed out, put back or gave up on, a removal): staging
	// packages deletes other revisions' folders, one of which it may be
	// installing from, and a Windows Update download would contend with its
	// install. Asked again at the agent's next look.
	if t, err := h.servicingResult(); err == nil && t != nil && t.Phase == host.UpdateRunning {
		return host.Staging{Revision: req.Revision, Phase: host.StageRunning}
	}
	if s.cur != nil {
		s.cur.cancel()
	}
	// Not the ask's context: the download outlives the agent's tick.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := &stageRun{rev: req.Revision, cancel: cancel, done: done, result: host.Staging{Revision: req.Revision, Phase: host.StageRunning, Done: done}}
	s.cur = r
	go func() {
		res := h.stage(ctx, req)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cur == r {
			r.result = res
		}
		cancel()
		close(done)
	}()
	return r.result
}

// stage downloads from where the revision says.
func (h *Host) stage(ctx context.Context, req host.UpdateRequest) host.Staging {
	out := host.Staging{Revision: req.Revision, Phase: host.StageDone}
	var err error
	switch req.Source {
	case config.SourcePackages:
		var running host.Build
		if running, err = readBuild(h.m.System); err == nil {
			s := servicing{dir: filepath.Join(h.o.StateDir, "updates"), client: h.m.Net.HTTP(), bandwidth: req.Bandwidth}
			_, out.Items, err = s.stage(ctx, req, running)
		}
	case config.SourceWindowsUpdate, "":
		out.Items, err = h.stageWindowsUpdate(ctx, req)
	default:
		err = fmt.Errorf("unknown update source %q", req.Source)
	}
	if err != nil {
		return host.Staging{Revision: req.Revision, Phase: host.StageFailed, Err: err.Error()}
	}
	return out
}

// stageWindowsUpdate searches as the install does, takes what it would
// take, checks the room for it, and downloads each at background priority.
func (h *Host) stageWindowsUpdate(ctx context.Context, req host.UpdateRequest) ([]host.StagedItem, error) {
	wu, done, err := h.m.WindowsUpdate()
	if err != nil {
		return nil, err
	}
	defer done()
	offered, err := wu.Search(wuSearch)
	if err != nil {
		return nil, fmt.Errorf("searching Windows Update: %w", withThrownCode(err))
	}
	chosen, err := chooseUpdates(offered, req)
	if err != nil {
		return nil, err
	}
	var items []host.StagedItem
	var total int64
	for _, i := range chosen {
		items = append(items, host.StagedItem{Name: kbOf(offered[i]) + ": " + offered[i].Title, Bytes: offered[i].Size, RebootFree: offered[i].RebootFree})
		total += offered[i].Size
	}
	drive := systemDrive(h.m.Box.Getenv)
	if free, err := h.m.Box.FreeBytes(drive); err == nil && free < total+stageKeepFree {
		return nil, fmt.Errorf("%s has %d MiB free; the download takes %d MiB and the install needs %d MiB beside it", drive, free>>20, total>>20, int64(stageKeepFree)>>20)
	}
	for j, i := range chosen {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rc, hr, err := wu.Download(i, true)
		if err != nil {
			return nil, fmt.Errorf("downloading %s: %w", items[j].Name, withThrownCode(err))
		}
		if rc != decide.WUSucceeded {
			return nil, fmt.Errorf("downloading %s: result code %d, HRESULT 0x%08X (see %s)", kbOf(offered[i]), rc, uint32(hr), decide.WindowsUpdateLog)
		}
	}
	return items, nil
}
