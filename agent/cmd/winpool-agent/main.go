// Command winpool-agent is the node agent: it runs in the HostProcess pod of
// its pool's DaemonSet on every Windows node and brings the node to the
// revision its Node label names (see internal/agent).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"winpool.dev/agent/internal/agent"
	"winpool.dev/agent/internal/apiserver"
	"winpool.dev/agent/internal/host"
	winhost "winpool.dev/agent/internal/host/windows"
	"winpool.dev/agent/internal/logs"
	"winpool.dev/agent/internal/operation"
	"winpool.dev/agent/internal/report"
)

// version is set at build time: -ldflags "-X main.version=v0.3.0".
var version = "dev"

func main() {
	// An administrator's check of this host before the first rollout,
	// `winpool-agent preflight --config config.json` (preflight.go).
	if len(os.Args) >= 2 && os.Args[1] == preflightCommand {
		os.Exit(preflightMain(os.Args[2:]))
	}
	logDir := os.Getenv("WINPOOL_LOG_DIR")
	if logDir == "" && runtime.GOOS == "windows" {
		logDir = logs.DefaultDir()
	}
	// The containerd upgrade task: `winpool-agent.exe containerd-swap <plan>`,
	// started by the agent as a SYSTEM scheduled task outside containerd.
	if len(os.Args) == 3 && os.Args[1] == winhost.ContainerdSwapCommand {
		log, closer := logs.New(os.Stdout, logDir, "containerd-swap.log")
		defer closer.Close()
		r, err := winhost.RunContainerdSwap(context.Background(), os.Args[2])
		if err != nil {
			log.Error("containerd swap could not start", "plan", os.Args[2], "err", err)
			closer.Close()
			os.Exit(1)
		}
		log.Info("containerd swap done", "phase", r.Phase, "version", r.Version, "message", r.Message)
		return
	}
	// The servicing task: `winpool-agent.exe servicing <plan>`, started by
	// the agent as a SYSTEM scheduled task outside its pod, so that no
	// restart of the pod stops DISM or the Windows Update client halfway.
	if len(os.Args) == 3 && os.Args[1] == winhost.ServicingCommand {
		log, closer := logs.New(os.Stdout, logDir, "servicing.log")
		defer closer.Close()
		log.Info("servicing task starting", "plan", os.Args[2], "version", version)
		// Not cancelled by anything: the task runs until servicing ends.
		r, err := winhost.RunServicing(context.Background(), os.Args[2])
		if err != nil {
			log.Error("servicing task failed", "plan", os.Args[2], "revision", r.Revision, "attempt", r.Attempt, "err", err)
			closer.Close()
			os.Exit(1)
		}
		if r.Error != "" {
			log.Error("servicing could not run", "revision", r.Revision, "attempt", r.Attempt, "target", r.Target, "error", r.Error, "result", r.ResultFile)
			return
		}
		log.Info("servicing done", "revision", r.Revision, "attempt", r.Attempt, "target", r.Target,
			"exitCode", r.Result.ExitCode, "detail", r.Result.Detail, "result", r.ResultFile)
		return
	}
	// The settings first (a missing NODE_NAME touches nothing), then the
	// host: it secures the state folder (a protected DACL, its owner
	// checked), and only then is the log opened in that folder. A log file
	// opened before would be written as SYSTEM into a folder a user may have
	// created, through a junction they placed there.
	stdout, _ := logs.New(os.Stdout, "", logs.FileName)
	s, err := readSettings(os.Getenv)
	if err != nil {
		stdout.Error("winpool-agent stopped", "err", err)
		os.Exit(1)
	}
	h, err := winhost.New(winhost.Options{KubeNetwork: os.Getenv("KUBE_NETWORK")})
	if err != nil {
		stdout.Error("winpool-agent stopped: the host is not usable", "err", err)
		os.Exit(1)
	}
	log, closer := logs.New(os.Stdout, logDir, logs.FileName)
	defer closer.Close()
	// client-go reports through klog (a watch that keeps failing, an API
	// server's deprecation warning): without this it goes to stderr only,
	// not into the agent's log file that a person reads on the node.
	klog.SetSlogLogger(log)
	if err := run(log, s, h); err != nil {
		log.Error("winpool-agent stopped", "err", err)
		closer.Close()
		os.Exit(1)
	}
}

// settings are what the agent reads from its environment. KUBE_NETWORK
// (read by main for the host) is how kube-proxy's own setup names its HNS
// network; unset, the agent recognizes it (internal/hns).
type settings struct {
	node, namespace string
	hnsInterval     time.Duration
	maxAttempts     int
	standalone      bool
	stage           bool
	stageBandwidth  int64
	patchCheck      time.Duration
}

func readSettings(getenv func(string) string) (settings, error) {
	s := settings{node: getenv("NODE_NAME"), namespace: getenv("POD_NAMESPACE")}
	if s.node == "" {
		return s, fmt.Errorf("NODE_NAME is not set (the DaemonSet sets it from spec.nodeName)")
	}
	if s.namespace == "" {
		return s, fmt.Errorf("POD_NAMESPACE is not set (the DaemonSet sets it from metadata.namespace)")
	}
	var err error
	if s.hnsInterval, err = envDuration("WINPOOL_HNS_INTERVAL", agent.DefaultHNSInterval); err != nil {
		return s, err
	}
	if s.maxAttempts, err = envInt("WINPOOL_MAX_ATTEMPTS", agent.DefaultMaxAttempts); err != nil {
		return s, err
	}
	if s.stage, err = agent.ParseStaging(getenv(agent.StagingEnv)); err != nil {
		return s, err
	}
	if s.stageBandwidth, err = agent.ParseStagingBandwidth(getenv(agent.StagingBandwidthEnv)); err != nil {
		return s, err
	}
	if s.patchCheck, err = agent.ParsePatchCheck(getenv(agent.PatchCheckEnv)); err != nil {
		return s, err
	}
	switch v := getenv("WINPOOL_STANDALONE"); v {
	case "", "false":
	case "true":
		s.standalone = true
	default:
		return s, fmt.Errorf("WINPOOL_STANDALONE=%q is neither true nor false", v)
	}
	return s, nil
}

// run is the agent with its settings and host.
func run(log *slog.Logger, s settings, h host.Host) error {
	cfg, err := apiserver.Config(os.Getenv, apiserver.ServiceAccountDir)
	if err != nil {
		return err
	}
	cfg.UserAgent = "winpool-agent/" + version
	for _, v := range apiserver.Ignored(os.Getenv) {
		log.Info("ignoring a machine environment variable for the agent's API client: it talks to the API server as itself, directly", "variable", v)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("winpool-agent starting", "version", version, "node", s.node, "namespace", s.namespace, "apiServer", cfg.Host)
	return agent.Run(ctx, agent.Options{
		NodeName:        s.node,
		Namespace:       s.namespace,
		Client:          client,
		Reports:         report.NewClient(dyn, s.namespace),
		Operations:      operation.NewClient(dyn, s.namespace),
		Host:            h,
		HNSInterval:     s.hnsInterval,
		MaxAttempts:     s.maxAttempts,
		Standalone:      s.standalone,
		Stage:           s.stage,
		StageBandwidth:  s.stageBandwidth,
		PatchCheckEvery: s.patchCheck,
		Version:         version,
		Log:             log,
		Events:          true,
	})
}

func envDuration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q is not a positive duration such as 15s", name, v)
	}
	return d, nil
}

func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q is not a positive whole number", name, v)
	}
	return n, nil
}
