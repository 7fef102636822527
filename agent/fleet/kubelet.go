package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// What the kubelet of a simulated node writes, with the fleet's admin
// client: the Ready condition across a reboot, nodeInfo, and its pods'
// readiness once it is back. Never winpool.dev/* annotations: those are the
// agents', written with their own tokens.

const fieldManager = "winpool-fleet"

type kubelet struct {
	client kubernetes.Interface
}

// nodeInfo is the part of status.nodeInfo the machine changes.
type nodeInfo struct {
	KernelVersion           string `json:"kernelVersion,omitempty"`
	ContainerRuntimeVersion string `json:"containerRuntimeVersion,omitempty"`
	BootID                  string `json:"bootID,omitempty"`
}

func readyCondition(ready bool, message string) corev1.NodeCondition {
	now := metav1.Now()
	c := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: message,
		LastHeartbeatTime: now, LastTransitionTime: now,
	}
	if ready {
		c.Status, c.Reason = corev1.ConditionTrue, "KubeletReady"
	}
	return c
}

// unknownCondition is Ready as the node lifecycle controller leaves it when
// the kubelet stops posting: Unknown, not False. Its message stays the
// fleet's reboot mark (ShuttingDown), which keeps kwok's stages off the node
// until it boots; winpool reads the status, never the message.
func unknownCondition() corev1.NodeCondition {
	now := metav1.Now()
	return corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown",
		Message: ShuttingDown, LastHeartbeatTime: now, LastTransitionTime: now,
	}
}

// setStatus patches the node's status (a strategic merge: conditions merge
// by type, nodeInfo field by field).
func (k *kubelet) setStatus(ctx context.Context, node string, info *nodeInfo, ready *corev1.NodeCondition) error {
	status := map[string]any{}
	if info != nil {
		status["nodeInfo"] = info
	}
	if ready != nil {
		status["conditions"] = []corev1.NodeCondition{*ready}
	}
	return k.patch(ctx, node, types.StrategicMergePatchType, map[string]any{"status": status}, "status")
}

func (k *kubelet) patch(ctx context.Context, node string, pt types.PatchType, body any, sub ...string) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return retry(ctx, func(ctx context.Context) error {
		_, err := k.client.CoreV1().Nodes().Patch(ctx, node, pt, data, metav1.PatchOptions{FieldManager: fieldManager}, sub...)
		return err
	})
}

// podsReady is the kubelet restarting a node's pods after a reboot: the
// node lifecycle controller marked them not Ready while the node was
// NotReady, and only the kubelet sets them Ready again (kwok's pod stages
// handle pending pods only).
func (k *kubelet) podsReady(ctx context.Context, node string) error {
	pods, err := k.podsOn(ctx, node)
	if err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || podReady(p) {
			continue
		}
		now := metav1.Now()
		body := map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}}}
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		err = retry(ctx, func(ctx context.Context) error {
			_, err := k.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{FieldManager: fieldManager}, "status")
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// podsOn lists the pods bound to node, from the API server's cache.
func (k *kubelet) podsOn(ctx context.Context, node string) (*corev1.PodList, error) {
	var pods *corev1.PodList
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		pods, err = k.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node, ResourceVersion: "0"})
		return err
	})
	return pods, err
}

// podNetworked names a Running pod on the node that is not on the host
// network (its sandbox goes through the CNI), or "" if there is none.
func (k *kubelet) podNetworked(ctx context.Context, node string) (string, error) {
	pods, err := k.podsOn(ctx, node)
	if err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && !p.Spec.HostNetwork {
			return p.Namespace + "/" + p.Name, nil
		}
	}
	return "", nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// retry runs f until it succeeds, fails for good, or ctx ends. A kubelet
// does not give up on reporting its node because the API server was busy or
// away for a while.
func retry(ctx context.Context, f func(context.Context) error) error {
	delay := 200 * time.Millisecond
	for {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := f(rctx)
		cancel()
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// transient: an error the same request may not meet again (the server
// overloaded, restarting or unreachable), unlike a refusal (NotFound,
// Forbidden, Invalid).
func transient(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == 429 || code >= 500
	}
	return true
}
