package decide

import (
	"fmt"
	"strings"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/versions"
)

// MinFreeBytes is the room a cumulative update needs on the system drive:
// Microsoft asks for several GiB for the download, the staged payload and
// the component store's backup; below it DISM fails half-way
// (0x80070070, ERROR_DISK_FULL) with the node already drained.
const MinFreeBytes = 10 << 30

// PreflightInput is what a preflight is judged from: the pending revision's
// configuration, the host as observed, and what the host's own read-only
// checks found (nil when none were needed: the host needs no update).
type PreflightInput struct {
	Config   config.Revision
	Observed host.Observed
	Findings *host.PreflightFindings
	// HNS: what HNS holds now; nil: not read.
	HNS *host.HNSCounts
}

// PreflightResult is the verdict: Ready when nothing blocks.
type PreflightResult struct {
	// Pending: a check has not answered yet (the Windows Update search);
	// there is no verdict until it has.
	Pending bool
	// Blocked says, one reason each, what would make the update fail on
	// this host; none means Ready.
	Blocked []string
	// Notes say what the update will meet that does not stop it (a pending
	// reboot it does first, a runtime or CSI Proxy the node image runs).
	Notes []string
}

// Ready: nothing blocks the update.
func (r PreflightResult) Ready() bool { return len(r.Blocked) == 0 }

// String is the verdict in one line: Ready, or Blocked and the reasons.
func (r PreflightResult) String() string {
	if r.Ready() {
		return "Ready"
	}
	return "Blocked: " + strings.Join(r.Blocked, "; ")
}

// PreflightUpdate is what an update of this host to cfg would install, and
// whether one is needed at all (the host is below the patch level, in the
// same release). err: the patch level cannot be read.
func PreflightUpdate(revision string, cfg config.Revision, obs host.Observed) (host.UpdateRequest, bool, error) {
	target, err := host.ParseBuild(cfg.PatchLevel)
	if err != nil {
		return host.UpdateRequest{}, false, err
	}
	req := host.UpdateRequest{Revision: revision, Target: target, Source: cfg.UpdateSource()}
	if cfg.Updates != nil {
		req.Packages, req.KBs = cfg.Updates.Packages, cfg.Updates.KBs
	}
	return req, obs.Build.SameRelease(target) && !obs.Build.AtLeast(target), nil
}

// Preflight judges whether the pending revision can be applied to this host,
// before the operator cordons and drains it: the same rules Next applies
// once the node is started, asked early, so a node that would fail is never
// taken out of service. Only what the node itself cannot get past blocks;
// what the agent handles on its way (a pending reboot) is a note.
func Preflight(in PreflightInput) PreflightResult {
	var r PreflightResult
	cfg, obs := in.Config, in.Observed
	target, err := host.ParseBuild(cfg.PatchLevel)
	switch {
	case err != nil:
		r.Blocked = append(r.Blocked, fmt.Sprintf("the revision's patchLevel: %v", err))
	case !obs.Build.SameRelease(target):
		r.Blocked = append(r.Blocked, fmt.Sprintf("node runs %s, the pool asks %s: an update never changes the Windows release; reimage the node", obs.Build, target))
	case !obs.Build.AtLeast(target):
		r.Blocked = append(r.Blocked, updateBlocks(in.Findings)...)
		if f := in.Findings; f != nil && f.Offer != nil {
			r.Pending = f.Offer.Searching
			if len(f.Offer.Takes) > 0 {
				r.Notes = append(r.Notes, "Windows Update offers what the install takes: "+strings.Join(f.Offer.Takes, "; "))
			}
		}
		if why := RebootReasons(obs.Reboot); len(why) > 0 {
			r.Notes = append(r.Notes, "a reboot is pending ("+strings.Join(why, ", ")+"): the agent reboots before it installs")
		}
	}
	if want := cfg.RuntimeVersion; want != nil {
		if cmp, err := versions.Compare(obs.ContainerdVersion, *want); err != nil || cmp != 0 {
			if why := ImageOwnsRuntime(cfg.RuntimeUpgrade, obs); why != "" {
				r.Blocked = append(r.Blocked, fmt.Sprintf("containerd %s would not be replaced with %s: %s; %s", orNone(obs.ContainerdVersion), *want, why, runtimeRemedy(obs)))
			}
		}
	}
	if want, have := cfg.CNIMode, obs.CNIMode; want != "" && have != "" && have != want {
		r.Blocked = append(r.Blocked, fmt.Sprintf("HNS network is %s, the pool asks for %s: the agent does not switch a CNI in place", have, want))
	}
	if why := dsrMissing(cfg.EnableDSR, in.HNS); why != "" {
		r.Blocked = append(r.Blocked, why)
	}
	if s := obs.RuntimeService; s.Wrapper != host.WrapperNone {
		r.Notes = append(r.Notes, "containerd runs as "+s.Describe())
	}
	if h := obs.CSIProxyHost; h != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("CSI Proxy runs as the host service %s (pipes answer: %t)", h.Describe(), h.PipesAnswer))
	}
	// A block needs no search to be said.
	r.Pending = r.Pending && r.Ready()
	return r
}

// updateBlocks: what the host's checks found that would stop the install.
func updateBlocks(f *host.PreflightFindings) []string {
	if f == nil {
		return nil
	}
	var blocks []string
	for _, s := range f.Sources {
		if s.Err != "" {
			blocks = append(blocks, fmt.Sprintf("update source %s cannot be reached: %s", s.Name, s.Err))
		}
	}
	if o := f.Offer; o != nil {
		switch {
		case o.Err != "":
			blocks = append(blocks, "the Windows Update search failed: "+o.Err)
		case o.Refusal != "":
			blocks = append(blocks, "nothing the install would take (the search before the drain): "+o.Refusal)
		}
	}
	if f.WUServiceDisabled {
		blocks = append(blocks, `the Windows Update service (wuauserv) is disabled (Start=4 under HKLM\SYSTEM\CurrentControlSet\Services\wuauserv), `+
			"so Windows Update can neither search nor install (0x80070422, ERROR_SERVICE_DISABLED): set it to start on demand "+
			"(sc.exe config wuauserv start= demand), or update the node from packages (os.updates.source: Packages)")
	}
	if why := automaticUpdatesInstall(f.AutomaticUpdates); why != "" {
		blocks = append(blocks, why)
	}
	if f.FreeBytes >= 0 && f.FreeBytes < MinFreeBytes {
		drive := f.SystemDrive
		if drive == "" {
			drive = "the system drive"
		}
		// The threshold, not the figure: a verdict that moved with every
		// megabyte would be rewritten on the Node at every look.
		blocks = append(blocks, fmt.Sprintf("%s has less than %s free, which an update needs", drive, gib(MinFreeBytes)))
	}
	return blocks
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// automaticUpdatesInstall says why the node's Automatic Updates policy
// would install updates by itself ("" when it does not): off
// (NoAutoUpdate 1), not set by policy, or only notifying (2, 3: downloads
// and asks; 7: asks to install and to restart) leave installing to
// winpool. 4 installs on its own schedule and restarts the node with its
// pods on it, or holds the installer when winpool's task starts; 5 leaves
// that to a local administrator.
func automaticUpdatesInstall(au host.AutomaticUpdates) string {
	switch {
	case au.NoAutoUpdate:
		return ""
	case au.AUOptions == 4, au.AUOptions == 5:
		return fmt.Sprintf(`Automatic Updates installs updates by itself (AUOptions=%d under HKLM\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate\AU) `+
			"and restarts the node with its pods on it: set the Group Policy Computer Configuration > Administrative Templates > Windows Components > "+
			"Windows Update > Configure Automatic Updates to Disabled, or to 2 (notify for download) for this node's group", au.AUOptions)
	}
	return ""
}
