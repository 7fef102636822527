package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
	"winpool.dev/agent/internal/report"
)

// Event reasons of a restart of kube-proxy.
const (
	ReasonKubeProxyRestarted     = "WinpoolKubeProxyRestarted"
	ReasonKubeProxyRestartFailed = "WinpoolKubeProxyRestartFailed"
)

// kubeProxyRestartTimeout bounds a restart: a stop and a start of one service.
const kubeProxyRestartTimeout = 2 * time.Minute

// repairHNSIfAsked restarts kube-proxy when the operator asks it for the
// node's current boot and no restart was made in that boot yet (the report
// remembers one across the agent's restarts). One per boot: a restart that
// did not help is the operator's to report, never the agent's to repeat, and
// an ask a person sets by hand costs at most one restart per boot. kube-proxy
// programs every Service again when it starts, which recreates what HNS lost
// while kube-proxy believed it programmed.
func (a *agent) repairHNSIfAsked(ctx context.Context, node *corev1.Node) {
	boot := node.Status.NodeInfo.BootID
	if boot == "" || node.Annotations[names.AnnHNSRepair] != boot || node.Labels[names.LabelPool] == "" {
		return
	}
	if r := a.rep.status.HNSRepair; r != nil && r.BootID == boot {
		return
	}
	if a.hnsRepair != nil && a.hnsRepair.BootID == boot {
		return
	}
	// Begun, a restart is finished even if the agent is stopped meanwhile:
	// a kube-proxy left stopped programs nothing.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kubeProxyRestartTimeout)
	service, err := a.o.Host.RestartKubeProxy(rctx)
	cancel()
	r := &report.HNSRepair{BootID: boot, At: metav1.NewTime(time.Now()), Service: service}
	switch {
	case errors.Is(err, host.ErrNoKubeProxyService):
		r.Result, r.Message = report.RepairUnsupported, err.Error()
	case err != nil:
		r.Result = report.RepairFailed
		r.Message = oneLine(fmt.Sprintf("restarting kube-proxy (%s): %v; its log is where the service writes it (C:\\k\\kubeproxy.err.log on AKS, C:\\ProgramData\\kubernetes\\logs on EKS), or the pod's (kubectl -n kube-system logs)", service, err))
	default:
		r.Result = report.RepairRestarted
		r.Message = "restarted kube-proxy (" + service + "): it programs every Service into HNS again"
	}
	a.hnsRepair = r
	a.log.Info("kube-proxy restart asked by the operator", "result", string(r.Result), "service", service, "err", err)
	typ, reason := corev1.EventTypeNormal, ReasonKubeProxyRestarted
	if r.Result != report.RepairRestarted {
		typ, reason = corev1.EventTypeWarning, ReasonKubeProxyRestartFailed
	}
	a.nodeEvent(ctx, node, typ, reason, r.Message)
	a.readHNS(ctx)
}
