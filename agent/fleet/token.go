package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

const (
	// AgentServiceAccount is the identity of winpool's agent pods.
	AgentServiceAccount = "winpool-agent"
	tokenLifetime       = time.Hour
	// A token is renewed once this share of its life has passed, as the
	// kubelet renews projected tokens (at 80%).
	renewAt = 0.8
)

// podToken is the ServiceAccount token the kubelet would project into one
// agent pod: bound to the pod (so the API server adds the node-name claim,
// and the token dies with the pod) and renewed before it expires.
//
// Renewal runs on timers rather than a goroutine per pod: thousands of pods
// would otherwise keep thousands of goroutines asleep for an hour.
type podToken struct {
	client             kubernetes.Interface
	namespace, podName string
	podUID             types.UID
	// failed hears of each failed request (the fleet logs a few and counts all).
	failed func(pod string, attempt int, err error)
	// now is the clock the renewal is planned on (tests move it).
	now func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{} // closed once the first token is there

	mu      sync.Mutex
	token   string
	expires time.Time
	timer   *time.Timer
	fails   int
}

func newPodToken(ctx context.Context, client kubernetes.Interface, namespace, podName string, uid types.UID,
	failed func(pod string, attempt int, err error)) *podToken {
	ctx, cancel := context.WithCancel(ctx)
	t := &podToken{
		client: client, namespace: namespace, podName: podName, podUID: uid, failed: failed, now: time.Now,
		ctx: ctx, cancel: cancel, ready: make(chan struct{}),
	}
	go t.renew()
	return t
}

// Token is the current token (the bearer RoundTripper asks on every request).
func (t *podToken) Token() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.token
}

// Wait returns once there is a token, or with ctx's error.
func (t *podToken) Wait(ctx context.Context) error {
	select {
	case <-t.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.ctx.Done():
		return fmt.Errorf("token of pod %s stopped", t.podName)
	}
}

// Stop ends renewal: the pod is gone or replaced.
func (t *podToken) Stop() {
	t.cancel()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil {
		t.timer.Stop()
	}
}

func (t *podToken) renew() {
	if t.ctx.Err() != nil {
		return
	}
	tok, err := t.request()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx.Err() != nil {
		return
	}
	var next time.Duration
	if err != nil {
		t.fails++
		// The pod may be gone already (its deletion not seen yet), or the API
		// busy: retry soon, then less often.
		next = min(time.Duration(1<<min(t.fails-1, 5))*time.Second, 30*time.Second)
		t.failed(t.podName, t.fails, err)
		// An old token still valid keeps serving until it expires.
	} else {
		first := t.token == ""
		t.fails = 0
		t.token = tok.Status.Token
		t.expires = tok.Status.ExpirationTimestamp.Time
		next = renewalDelay(t.now(), t.expires)
		if first {
			close(t.ready)
		}
	}
	t.timer = time.AfterFunc(next, t.renew)
}

// renewalDelay: renew at 80% of the remaining life of a token issued now.
func renewalDelay(now, expires time.Time) time.Duration {
	return time.Duration(float64(expires.Sub(now)) * renewAt)
}

func (t *podToken) request() (*authenticationv1.TokenRequest, error) {
	ctx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
	defer cancel()
	seconds := int64(tokenLifetime / time.Second)
	return t.client.CoreV1().ServiceAccounts(t.namespace).CreateToken(ctx, AgentServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &seconds,
			BoundObjectRef: &authenticationv1.BoundObjectReference{
				Kind: "Pod", APIVersion: "v1", Name: t.podName, UID: t.podUID,
			},
		},
	}, metav1.CreateOptions{})
}
