package fleet

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"winpool.dev/agent/fleet/hnsmodel"
	"winpool.dev/agent/internal/host"
)

// HNSMode is what the simulated hosts' HNS holds (--hns).
type HNSMode int

const (
	// HNSAuto: what kube-proxy would have programmed (package hnsmodel),
	// caught up gradually after each boot.
	HNSAuto HNSMode = iota
	// HNSOff: the agents report no HNS counts.
	HNSOff
	// HNSFixed: always Settings.HNSFixed.
	HNSFixed
)

// Settings is the fleet's command line.
type Settings struct {
	Nodes      int
	NamePrefix string
	Labels     map[string]string
	OS         string
	Build      host.Build
	// Containerd is the version the machines start with; ContainerdSuffix the
	// vendor build metadata ("+azure") their kubelets append, kept across upgrades.
	Containerd       string
	ContainerdSuffix string
	CNIMode          string
	ApplyTime        time.Duration
	// DownloadTime: how long downloading the update takes (0: half of
	// ApplyTime, within it); with it, ApplyTime is the install alone.
	DownloadTime time.Duration
	// Hotpatch: the machines are enrolled in hotpatching (--hotpatch
	// enrolled): their first update and every third after it are baselines,
	// the others hotpatches that need no reboot.
	Hotpatch bool
	// WSUSApproved names a file holding the build whose cumulative update a
	// simulated WSUS approves, and when it was published
	// ("10.0.20348.2762 2026-12-08T18:00:00Z"); read at every search and
	// install, so a test moves the approval by rewriting it. "": no WSUS
	// (the update a servicing task asks for is offered).
	WSUSApproved string
	RebootTime   time.Duration
	// TransientRetryAfter is the agents' wait after a first transient
	// Windows Update failure (0: theirs).
	TransientRetryAfter time.Duration
	FailRate            float64
	Seed                uint64
	FailNodes           map[string]bool
	AgentNamespace      string
	Create              bool
	CreateOnly          bool
	HNS                 HNSMode
	HNSFixed            host.HNSCounts
	HNSSync             time.Duration
	// HNSInterval is how often each agent reads HNS (a real agent's is
	// agent.DefaultHNSInterval).
	HNSInterval time.Duration
	JSONLogs    bool
	// Profile is the node image the machines run (how their services are installed).
	Profile Profile
	// Faults are the ways the hosts are less kind than the default fake.
	Faults Faults
	// StatsFile: where the nodes' statistics go when the fleet stops ("": nowhere).
	StatsFile string
	// HNSFaultAfter is how long after a node's HNS caught up its HNS fault
	// (hns-collapse, hns-restart, lb-deleted) strikes.
	HNSFaultAfter time.Duration
	// HNSCostScale multiplies what each change costs a node's HNS to program
	// (hnsmodel.Rates); 0 makes programming free.
	HNSCostScale float64
	// KubeProxyDSR: the nodes' kube-proxy runs with --enable-dsr, so every
	// HNS load balancer it programs has Direct Server Return.
	KubeProxyDSR bool
	// LatencyFile: where the fleet's network-programming latency histogram
	// goes when it stops ("": nowhere).
	LatencyFile string
}

// Releases are the Windows Server versions a pool can run, by build number.
var Releases = map[string]int{"ltsc2019": 17763, "ltsc2022": 20348, "ltsc2025": 26100}

// ErrHelp is returned for -h/--help (usage already printed).
var ErrHelp = flag.ErrHelp

// rawFlags are the flags read as strings, checked by ParseSettings.
type rawFlags struct {
	labels                                       repeated
	build, containerd, failNodes, hns, logFormat *string
	profile, faults, hotpatch                    *string
	noCreate                                     *bool
}

func defineFlags(fs *flag.FlagSet, s *Settings) *rawFlags {
	var r rawFlags
	fs.IntVar(&s.Nodes, "nodes", 3, "number of simulated Windows nodes")
	fs.StringVar(&s.NamePrefix, "name-prefix", "win-", "node names are <prefix><index>")
	fs.Var(&r.labels, "labels", "extra node labels, k=v,k=v (how pools select the nodes); repeatable, later values win")
	fs.StringVar(&s.OS, "os", "ltsc2022", "Windows Server release: ltsc2019 | ltsc2022 | ltsc2025")
	r.build = fs.String("build", "10.0.20348.2700", "the machines' starting build, 10.0.<build>.<revision>, a build of --os")
	r.containerd = fs.String("containerd", "1.7.20", "the machines' starting containerd version; vendor metadata (1.7.20+azure) allowed")
	fs.StringVar(&s.CNIMode, "cni", "overlay", "the machines' HNS network: overlay | l2bridge")
	fs.DurationVar(&s.ApplyTime, "apply-time", 5*time.Second, "how long installing an update takes")
	r.hotpatch = fs.String("hotpatch", "", "enrolled: the machines are enrolled in hotpatching (Windows Server 2025): of their updates the first and every third after it are baselines (a reboot), the others hotpatches (none)")
	fs.DurationVar(&s.DownloadTime, "download-time", 0, "how long downloading the update takes; --apply-time is then the install alone (0: half of --apply-time, within it)")
	fs.DurationVar(&s.RebootTime, "reboot-time", time.Second, "how long a reboot keeps the node NotReady")
	fs.StringVar(&s.WSUSApproved, "wsus-approved-file", "", "a file naming the build whose cumulative update a simulated WSUS approves and its publication time (\"10.0.20348.2762 2026-12-08T18:00:00Z\"), read at every search: machines below it are offered it alone and land on it")
	fs.DurationVar(&s.TransientRetryAfter, "transient-retry-after", 0, "the agents' wait after a first transient Windows Update failure (0: the agent's 5m)")
	fs.Float64Var(&s.FailRate, "fail-rate", 0, "probability that a node's update install fails (seeded by --seed)")
	fs.Uint64Var(&s.Seed, "seed", 1, "seed of --fail-rate")
	r.failNodes = fs.String("fail-nodes", "", "nodes whose update install always fails, a,b")
	fs.StringVar(&s.AgentNamespace, "agent-namespace", "winpool-agents", "namespace of the winpool agent pods")
	r.noCreate = fs.Bool("no-create", false, "the nodes exist already: only play them")
	fs.BoolVar(&s.CreateOnly, "create-only", false, "create the nodes and exit")
	r.hns = fs.String("hns", "auto", "HNS counts: auto (kube-proxy's model) | off (agents report none) | LB,ENDPOINTS")
	fs.DurationVar(&s.HNSSync, "hns-sync-time", 2*time.Second, "how long HNS takes to catch up after a boot (ltsc2019: three times that)")
	fs.DurationVar(&s.HNSInterval, "hns-interval", time.Second, "how often each agent reads HNS (a real agent: every 15s, WINPOOL_HNS_INTERVAL; the default converges tests fast)")
	r.logFormat = fs.String("log-format", "text", "text | json (one object per line)")
	fs.DurationVar(&s.HNSFaultAfter, "hns-fault-after", 20*time.Second, "how long after a node's HNS caught up (or the fleet started) the HNS faults hns-collapse, hns-restart and lb-deleted strike")
	fs.BoolVar(&s.KubeProxyDSR, "kube-proxy-dsr", false, "the nodes' kube-proxy runs with --enable-dsr: its HNS load balancers have Direct Server Return")
	fs.Float64Var(&s.HNSCostScale, "hns-cost-scale", 1, "multiplies the time each Service or EndpointSlice change takes a node's HNS to program (the per-release rates of kubernetes/kubernetes#109124); 0: free")
	fs.StringVar(&s.LatencyFile, "latency-file", "", "when the fleet stops (SIGTERM), write its network-programming latency (from each change to each node's HNS holding it) there as JSON: a summary and the histogram")
	fs.StringVar(&s.StatsFile, "stats-file", "", "when the fleet stops (SIGTERM), write each node's installs, reboots and their reasons, containerd swaps and rollbacks there as JSON")
	r.profile = fs.String("host-profile", ProfileKind, "the node image the machines are built as (profiles/<name>.yaml): kind | aks | eks | onprem | onprem-wsus | rke2")
	r.faults = fs.String("host-faults", "", faultsUsage())
	return &r
}

// ParseSettings reads the command line. Errors name the flag and what it
// wants; usage goes to out.
func ParseSettings(args []string, out io.Writer) (Settings, error) {
	var s Settings
	fs := flag.NewFlagSet("winpool-fleet", flag.ContinueOnError)
	fs.SetOutput(out)
	r := defineFlags(fs, &s)
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	if fs.NArg() > 0 {
		return s, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	errs := r.machines(&s)
	errs = append(errs, r.fleet(&s)...)
	return s, errors.Join(errs...)
}

// machines checks and fills in what the simulated machines are.
func (r *rawFlags) machines(s *Settings) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	release, known := Releases[s.OS]
	if !known {
		bad("--os must be ltsc2019, ltsc2022 or ltsc2025, got %q", s.OS)
	}
	var err error
	if s.Build, err = host.ParseBuild(*r.build); err != nil {
		bad("--build: %v", err)
	} else if known && (s.Build.Major != 10 || s.Build.Minor != 0 || s.Build.Build != release) {
		bad("--build %s is not a build of %s: %s builds are 10.0.%d.<revision>", s.Build, s.OS, s.OS, release)
	}
	if s.Containerd, s.ContainerdSuffix, err = splitContainerd(*r.containerd); err != nil {
		bad("--containerd: %v", err)
	}
	if s.Profile, err = parseProfile(*r.profile); err != nil {
		bad("--host-profile: %v", err)
	} else if s.ContainerdSuffix, err = s.Profile.containerdSuffix(s.ContainerdSuffix); err != nil {
		bad("%v", err)
	}
	if s.CNIMode != "overlay" && s.CNIMode != "l2bridge" {
		bad("--cni must be overlay or l2bridge, got %q", s.CNIMode)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--apply-time", s.ApplyTime}, {"--download-time", s.DownloadTime}, {"--reboot-time", s.RebootTime}, {"--hns-sync-time", s.HNSSync}, {"--transient-retry-after", s.TransientRetryAfter}} {
		if d.v < 0 {
			bad("%s must not be negative, got %s", d.flag, d.v)
		}
	}
	if s.HNSCostScale < 0 {
		bad("--hns-cost-scale must not be negative, got %g", s.HNSCostScale)
	}
	switch *r.hns {
	case "auto":
		s.HNS = HNSAuto
	case "off":
		s.HNS = HNSOff
	default:
		s.HNS = HNSFixed
		if s.HNSFixed, err = parseCounts(*r.hns); err != nil {
			bad("--hns must be auto, off or LB,ENDPOINTS: %v", err)
		}
	}
	if s.Faults, err = parseFaults(*r.faults); err != nil {
		bad("--host-faults: %v", err)
	}
	switch *r.hotpatch {
	case "":
	case "enrolled":
		s.Hotpatch = true
	default:
		bad("--hotpatch must be enrolled (or not given), got %q", *r.hotpatch)
	}
	return errs
}

// fleet checks and fills in how many nodes there are, their names and how the fleet runs.
func (r *rawFlags) fleet(s *Settings) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if s.Nodes < 0 {
		bad("--nodes must not be negative, got %d", s.Nodes)
	}
	if errs := validation.IsDNS1123Subdomain(s.NamePrefix + "0"); len(errs) > 0 {
		bad("--name-prefix %q does not make valid node names: %s", s.NamePrefix, strings.Join(errs, "; "))
	}
	var err error
	if s.Labels, err = parseLabels(strings.Join(r.labels, ",")); err != nil {
		bad("--labels: %v", err)
	}
	if s.HNSInterval <= 0 {
		bad("--hns-interval must be positive, got %s", s.HNSInterval)
	}
	if !(s.FailRate >= 0 && s.FailRate <= 1) {
		bad("--fail-rate must be between 0 and 1, got %v", s.FailRate)
	}
	s.FailNodes = map[string]bool{}
	for _, n := range strings.Split(*r.failNodes, ",") {
		if n = strings.TrimSpace(n); n != "" {
			s.FailNodes[n] = true
		}
	}
	if errs := validation.IsDNS1123Label(s.AgentNamespace); len(errs) > 0 {
		bad("--agent-namespace %q: %s", s.AgentNamespace, strings.Join(errs, "; "))
	}
	s.Create = !*r.noCreate
	if *r.noCreate && s.CreateOnly {
		bad("--no-create and --create-only together do nothing")
	}
	switch *r.logFormat {
	case "text":
	case "json":
		s.JSONLogs = true
	default:
		bad("--log-format must be text or json, got %q", *r.logFormat)
	}
	return errs
}

// repeated collects every use of a flag: callers add their labels to a base
// set (a test's own label space) with a second --labels.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("label %s value %q: %s", k, v, strings.Join(errs, "; "))
		}
		out[k] = v
	}
	return out, nil
}

var semver = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// splitContainerd separates a version from the vendor's build metadata:
// "1.7.20+azure" is containerd 1.7.20 as Azure builds it.
func splitContainerd(v string) (version, suffix string, err error) {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	version, meta, hasMeta := strings.Cut(v, "+")
	if !semver.MatchString(version) || (hasMeta && meta == "") {
		return "", "", fmt.Errorf("%q is not a containerd version like 1.7.20 or 1.7.20+azure", v)
	}
	if hasMeta {
		suffix = "+" + meta
	}
	return version, suffix, nil
}

func parseCounts(s string) (host.HNSCounts, error) {
	lb, ep, ok := strings.Cut(s, ",")
	if !ok {
		return host.HNSCounts{}, fmt.Errorf("%q is not LB,ENDPOINTS", s)
	}
	l, err1 := strconv.Atoi(strings.TrimSpace(lb))
	e, err2 := strconv.Atoi(strings.TrimSpace(ep))
	if err1 != nil || err2 != nil || l < 0 || e < 0 {
		return host.HNSCounts{}, fmt.Errorf("%q is not two whole numbers LB,ENDPOINTS", s)
	}
	return host.HNSCounts{LoadBalancers: l, RemoteEndpoints: e}, nil
}

// NodeName is the name of the fleet's i-th node.
func (s *Settings) NodeName(i int) string { return s.NamePrefix + strconv.Itoa(i) }

// Rates is what each HNS operation costs this release (2025 as 2022: no
// figure of its own is published).
func Rates(b host.Build) hnsmodel.Rates {
	if b.Build == Releases["ltsc2019"] {
		return hnsmodel.RatesLTSC2019
	}
	return hnsmodel.RatesLTSC2022
}

// CatchUp is how long this release's HNS takes to hold everything after a
// boot: kubernetes/kubernetes#109124 measured Windows Server 2019 far slower
// than 2022 at the same load.
func (s *Settings) CatchUp(b host.Build) time.Duration {
	if b.Build == Releases["ltsc2019"] {
		return 3 * s.HNSSync
	}
	return s.HNSSync
}
