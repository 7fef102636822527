package fleet

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestTokensAreRenewedAt80PercentOfTheirLife(t *testing.T) {
	now := time.Now()
	if got := renewalDelay(now, now.Add(time.Hour)); got != 48*time.Minute {
		t.Errorf("an hour's token is renewed after %v, want 48m", got)
	}
}

// An agent's client sends whatever token is current: a renewed token is
// used from the next request on, without a new client (the agent keeps
// running). A failed request is retried.
func TestAgentClientsUseTheCurrentToken(t *testing.T) {
	cs := kfake.NewClientset()
	var mu sync.Mutex
	issued := 0
	cs.PrependReactor("create", "serviceaccounts", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		issued++
		if issued == 1 {
			return true, nil, apierrors.NewServiceUnavailable("starting")
		}
		// The first good token lives 300ms (renewed after 240ms), the next an hour.
		life := time.Hour
		if issued == 2 {
			life = 300 * time.Millisecond
		}
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
			Token: fmt.Sprintf("token-%d", issued), ExpirationTimestamp: metav1.NewTime(time.Now().Add(life)),
		}}, nil
	})
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"win-0"}}`)
	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var failures atomic.Int32
	tok := newPodToken(ctx, cs, "agents", "agent-a", "uid-a", func(string, int, error) { failures.Add(1) })
	defer tok.Stop()
	waitCtx, done := context.WithTimeout(ctx, 10*time.Second)
	defer done()
	if err := tok.Wait(waitCtx); err != nil {
		t.Fatalf("no token after a failed request: %v", err)
	}
	if n := failures.Load(); n != 1 {
		t.Errorf("%d failed token requests reported, want 1", n)
	}
	client, err := (&agentClients{host: srv.URL, base: http.DefaultTransport}).forToken(agentIdentity{node: "win-0", token: tok.Token, saDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	get := func() string {
		if _, err := client.CoreV1().Nodes().Get(ctx, "win-0", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return seen[len(seen)-1]
	}
	if got := get(); got != "Bearer token-2" {
		t.Errorf("first request: Authorization %q, want the first token issued", got)
	}
	eventually(t, "the renewed token in use", func() bool { return get() == "Bearer token-3" })
}
