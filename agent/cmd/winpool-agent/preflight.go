package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"
	"unicode/utf16"

	"winpool.dev/agent/internal/apiserver"
	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	winhost "winpool.dev/agent/internal/host/windows"
)

// preflightCommand is `winpool-agent preflight`: an administrator's check
// of a Windows host, from a shell on it, before the first rollout. It
// reads the host as the agent does and asks decide.Preflight whether the
// revision could be applied; it installs, reboots and reports nothing.
const preflightCommand = "preflight"

// Exit codes of `winpool-agent preflight`.
const (
	preflightReady   = 0
	preflightBlocked = 1
	// preflightCannotRun: bad flags, a config that does not read, a host
	// that cannot be read.
	preflightCannotRun = 2
)

// apiDialTimeout bounds the dial to the kubelet's API server.
const apiDialTimeout = 10 * time.Second

const preflightUsage = `usage: winpool-agent preflight --config config.json
       winpool-agent preflight --patch-level 10.0.20348.2762

Checks, without changing anything, whether this host could take a pool's
revision: its release and patch level, the update sources (packages,
WSUS or Windows Update) and the room on the system drive, containerd and
the HNS network. Prints each check, then Ready (exit 0) or Blocked: …
(exit 1); exit 2 when it cannot run.

  --config FILE        a revision's config.json:
                       kubectl get cm -n winpool-agents winpool-<pool>-<rev> \
                         -o jsonpath='{.data.config\.json}' > config.json
  --patch-level BUILD  only a patch level, from Windows Update (or WSUS)
`

// preflightEnv is what the command reads beyond its flags: the host (the
// Windows one in preflightMain), files, the environment, the network.
type preflightEnv struct {
	newHost  func() (host.Host, error)
	readFile func(string) ([]byte, error)
	getenv   func(string) string
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
}

// preflightMain runs the command on this machine and returns its exit code.
func preflightMain(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return runPreflight(ctx, args, os.Stdout, os.Stderr, preflightEnv{
		// As the agent builds it (main): the state folder is secured
		// first, and a folder someone else owns is refused here as it
		// would stop the agent.
		newHost:  func() (host.Host, error) { return winhost.New(winhost.Options{KubeNetwork: os.Getenv("KUBE_NETWORK")}) },
		readFile: os.ReadFile,
		getenv:   os.Getenv,
		dial:     (&net.Dialer{}).DialContext,
	})
}

// runPreflight is the command: flags, the revision, the host, the checks
// the update needs, the verdict, printed to stdout; why it cannot run to
// stderr.
func runPreflight(ctx context.Context, args []string, stdout, stderr io.Writer, env preflightEnv) int {
	fs := flag.NewFlagSet(preflightCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	configFile := fs.String("config", "", "")
	patchLevel := fs.String("patch-level", "", "")
	cannot := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "winpool-agent preflight: "+format+"\n", a...)
		return preflightCannotRun
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, preflightUsage)
			return preflightCannotRun
		}
		return cannot("%v\n\n%s", err, preflightUsage)
	}
	if fs.NArg() > 0 || (*configFile == "") == (*patchLevel == "") {
		return cannot("give either --config or --patch-level\n\n%s", preflightUsage)
	}
	var heading string
	var cfg config.Revision
	if *patchLevel != "" {
		if _, err := host.ParseBuild(*patchLevel); err != nil {
			return cannot("--patch-level: %v", err)
		}
		cfg = config.Revision{PatchLevel: *patchLevel}
		heading = fmt.Sprintf("patch level %s from Windows Update (or the node's WSUS)", *patchLevel)
	} else {
		b, err := env.readFile(*configFile)
		if err != nil {
			return cannot("reading the revision's config: %v", err)
		}
		text, err := configText(b)
		if err == nil {
			cfg, err = config.Parse(text)
		}
		if err != nil {
			return cannot("%s: %v", *configFile, err)
		}
		heading = fmt.Sprintf("revision %s of pool %s: patch level %s from %s", cfg.Revision, orDash(cfg.Pool), cfg.PatchLevel, cfg.UpdateSource())
	}
	h, err := env.newHost()
	if err != nil {
		return cannot("the host is not usable: %v", err)
	}
	obs, err := h.Observe(ctx)
	if err != nil {
		return cannot("cannot read the host: %v", err)
	}
	in := decide.PreflightInput{Config: cfg, Observed: obs}
	if req, needed, err := decide.PreflightUpdate(cfg.Revision, cfg, obs); err == nil && needed {
		f := h.Preflight(ctx, req)
		// A person waits for the Windows Update search (the agent does not).
		for f.Offer != nil && f.Offer.Searching && ctx.Err() == nil {
			f = h.Preflight(ctx, req)
		}
		in.Findings = &f
	}
	return printPreflight(stdout, preflightReport{
		Heading:   heading,
		Input:     in,
		Result:    decide.Preflight(in),
		APIServer: apiServerNote(ctx, env),
	})
}

// preflightReport is what the command found, for printPreflight.
type preflightReport struct {
	// Heading says what was checked (the revision, or a patch level).
	Heading string
	Input   decide.PreflightInput
	Result  decide.PreflightResult
	// APIServer says whether the kubelet's API server answers; never
	// blocking (the agent has other ways to it).
	APIServer string
}

// printPreflight prints the report: what was asked, the host, each check
// of the update, the notes, then Ready or Blocked: … (the value the agent
// writes to its Node's winpool.dev/preflight); and returns the exit code.
func printPreflight(w io.Writer, r preflightReport) int {
	obs, cfg := r.Input.Observed, r.Input.Config
	fmt.Fprintln(w, r.Heading)
	fmt.Fprintf(w, "host: build %s, containerd %s, HNS network %s\n", obs.Build, orDash(obs.ContainerdVersion), orDash(obs.CNIMode))
	target, err := host.ParseBuild(cfg.PatchLevel)
	switch f := r.Input.Findings; {
	case err != nil:
		fmt.Fprintln(w, "update: not checked (the patch level does not read)")
	case !obs.Build.SameRelease(target):
		fmt.Fprintf(w, "update: not checked (the host runs another release than %s)\n", target)
	case obs.Build.AtLeast(target):
		fmt.Fprintf(w, "update: none needed (%s is at or past %s)\n", obs.Build, target)
	case f == nil:
		fmt.Fprintf(w, "update: %s to %s, not checked\n", obs.Build, target)
	default:
		fmt.Fprintf(w, "update: %s to %s from %s\n", obs.Build, target, cfg.UpdateSource())
		for _, s := range f.Sources {
			if s.Err == "" {
				fmt.Fprintf(w, "  ok      %s\n", s.Name)
			} else {
				fmt.Fprintf(w, "  FAILED  %s: %s\n", s.Name, s.Err)
			}
		}
		printOffer(w, f.Offer)
		drive := orDash(f.SystemDrive)
		switch need := gib(decide.MinFreeBytes); {
		case f.FreeBytes < 0:
			fmt.Fprintf(w, "  ?       %s free space could not be read (not judged)\n", drive)
		case f.FreeBytes < decide.MinFreeBytes:
			fmt.Fprintf(w, "  FAILED  %s has %s free, an update needs %s\n", drive, gib(f.FreeBytes), need)
		default:
			fmt.Fprintf(w, "  ok      %s has %s free (an update needs %s)\n", drive, gib(f.FreeBytes), need)
		}
	}
	for _, n := range r.Result.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if r.APIServer != "" {
		fmt.Fprintf(w, "note: %s\n", r.APIServer)
	}
	fmt.Fprintln(w, r.Result.String())
	if r.Result.Ready() {
		return preflightReady
	}
	return preflightBlocked
}

// apiServerNote says whether the API server of the kubelet's kubeconfig
// answers a TCP dial: the endpoint the agent uses after a reboot, before
// kube-proxy programs the kubernetes Service (internal/apiserver). Only
// its host and port are shown, nothing else of the file.
func apiServerNote(ctx context.Context, env preflightEnv) string {
	paths := apiserver.KubeletKubeconfigs(env.getenv)
	if len(paths) == 0 {
		return "API server: not checked (WINPOOL_KUBELET_KUBECONFIG=none)"
	}
	server, _ := apiserver.KubeletServer(env.readFile, paths)
	if server == "" {
		return fmt.Sprintf("API server: no kubelet kubeconfig with an https server at %s (the agent will need WINPOOL_API_SERVER or the kubernetes Service)", strings.Join(paths, ", "))
	}
	u, err := url.Parse(server)
	if err != nil || u.Hostname() == "" {
		return "API server: the kubelet's kubeconfig names no usable server"
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	ctx, cancel := context.WithTimeout(ctx, apiDialTimeout)
	defer cancel()
	c, err := env.dial(ctx, "tcp", addr)
	if err != nil {
		return fmt.Sprintf("API server https://%s (the kubelet's kubeconfig) does not answer a TCP dial: %v", addr, err)
	}
	c.Close()
	return fmt.Sprintf("API server https://%s (the kubelet's kubeconfig) answers a TCP dial", addr)
}

// configText is config.json as UTF-8: Windows PowerShell 5.1's `>` writes
// UTF-16 with a byte order mark, and some editors a UTF-8 one.
func configText(b []byte) ([]byte, error) {
	switch {
	case bytes.HasPrefix(b, []byte{0xEF, 0xBB, 0xBF}):
		return b[3:], nil
	case bytes.HasPrefix(b, []byte{0xFF, 0xFE}), bytes.HasPrefix(b, []byte{0xFE, 0xFF}):
		b16 := b[2:]
		if len(b16)%2 != 0 {
			return nil, errors.New("UTF-16 text with an odd number of bytes")
		}
		u := make([]uint16, len(b16)/2)
		for i := range u {
			if b[0] == 0xFF {
				u[i] = uint16(b16[2*i]) | uint16(b16[2*i+1])<<8
			} else {
				u[i] = uint16(b16[2*i])<<8 | uint16(b16[2*i+1])
			}
		}
		return []byte(string(utf16.Decode(u))), nil
	}
	return b, nil
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printOffer prints what the Windows Update search found (nothing when none
// was made).
func printOffer(w io.Writer, o *host.UpdateOffer) {
	switch {
	case o == nil:
	case o.Err != "":
		fmt.Fprintf(w, "  FAILED  the Windows Update search: %s\n", o.Err)
	case o.Refusal != "":
		fmt.Fprintf(w, "  FAILED  nothing the install would take: %s\n", o.Refusal)
	case o.Searching:
		fmt.Fprintln(w, "  ?       the Windows Update search has not answered")
	default:
		for _, t := range o.Takes {
			fmt.Fprintf(w, "  ok      offered: %s\n", t)
		}
	}
}
