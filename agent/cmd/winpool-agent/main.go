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
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"winpool.dev/agent/internal/agent"
	winhost "winpool.dev/agent/internal/host/windows"
)

// version is set at build time: -ldflags "-X main.version=v0.3.0".
var version = "dev"

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("winpool-agent stopped", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	node := os.Getenv("NODE_NAME")
	if node == "" {
		return fmt.Errorf("NODE_NAME is not set (the DaemonSet sets it from spec.nodeName)")
	}
	namespace := os.Getenv("POD_NAMESPACE")
	if namespace == "" {
		return fmt.Errorf("POD_NAMESPACE is not set (the DaemonSet sets it from metadata.namespace)")
	}
	hnsInterval, err := envDuration("WINPOOL_HNS_INTERVAL", agent.DefaultHNSInterval)
	if err != nil {
		return err
	}
	maxAttempts, err := envInt("WINPOOL_MAX_ATTEMPTS", agent.DefaultMaxAttempts)
	if err != nil {
		return err
	}
	cfg, err := restConfig(os.Getenv("WINPOOL_API_SERVER"))
	if err != nil {
		return err
	}
	cfg.UserAgent = "winpool-agent/" + version
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	h, err := winhost.New(winhost.Options{})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("winpool-agent starting", "version", version, "node", node, "namespace", namespace, "apiServer", cfg.Host)
	return agent.Run(ctx, agent.Options{
		NodeName:    node,
		Namespace:   namespace,
		Client:      client,
		Host:        h,
		HNSInterval: hnsInterval,
		MaxAttempts: maxAttempts,
		Version:     version,
		Log:         log,
	})
}

// restConfig is KUBECONFIG when set, else the pod's in-cluster config, whose
// token client-go re-reads as the kubelet rotates it. apiServer replaces the
// in-cluster address: right after a reboot the Service ClusterIP has no HNS
// load balancer on this node yet, so the agent would not reach the API
// through it until kube-proxy catches up.
func restConfig(apiServer string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if path := os.Getenv("KUBECONFIG"); path != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, err
	}
	if apiServer != "" {
		if !strings.Contains(apiServer, "://") {
			apiServer = "https://" + apiServer
		}
		cfg.Host = apiServer
	}
	return cfg, nil
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
