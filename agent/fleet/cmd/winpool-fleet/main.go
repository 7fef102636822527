// Command winpool-fleet is the simulated Windows fleet (run it through
// hack/sim.sh): kwok nodes that look like Windows Server nodes, each running
// the real winpool agent against a simulated machine, authenticated as the
// agent pod on that node. The admin kubeconfig comes from KUBECONFIG.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"winpool.dev/agent/fleet"
)

func main() {
	s, err := fleet.ParseSettings(os.Args[1:], os.Stderr)
	if errors.Is(err, fleet.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "winpool-fleet: %v\n", err)
		os.Exit(2)
	}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if s.JSONLogs {
		h = slog.NewJSONHandler(os.Stderr, nil)
	}
	log := slog.New(h)
	// client-go's own messages (throttling, watch errors) in the same format.
	klog.SetSlogLogger(log)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	admin, err := fleet.AdminConfig()
	if err == nil {
		err = fleet.Run(ctx, s, admin, log)
	}
	if err != nil && ctx.Err() == nil {
		log.Error("simulated fleet failed", "err", err)
		os.Exit(1)
	}
}
