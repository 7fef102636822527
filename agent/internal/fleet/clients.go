package fleet

import (
	"fmt"
	"net/http"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// agentClients builds the agents' API clients. Every agent authenticates with
// its own pod's token and nothing else, but they all share one transport (TLS
// session, HTTP/2 connections): thousands of agents in one process could not
// afford a connection pool each, and the API server sees the same requests
// either way. Each agent keeps its own client-side rate limiter, as a real
// agent would.
type agentClients struct {
	host string
	base http.RoundTripper
}

const (
	agentQPS   = 50
	agentBurst = 100
)

// newAgentClients keeps the API server's address and CA from the admin
// configuration, dropping its credentials.
func newAgentClients(admin *rest.Config) (*agentClients, error) {
	anon := rest.AnonymousClientConfig(admin)
	base, err := rest.TransportFor(anon)
	if err != nil {
		return nil, fmt.Errorf("building the agents' transport: %w", err)
	}
	return &agentClients{host: anon.Host, base: base}, nil
}

func (c *agentClients) forToken(node string, token func() string) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(&rest.Config{
		Host:      c.host,
		Transport: &bearer{base: c.base, token: token},
		QPS:       agentQPS,
		Burst:     agentBurst,
		UserAgent: "winpool-agent/sim (" + node + ")",
	})
}

// bearer authenticates each request with the token current at that moment,
// so a renewed token takes effect without rebuilding the client.
type bearer struct {
	base  http.RoundTripper
	token func() string
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	// A RoundTripper must not change the caller's request.
	r := utilnet.CloneRequest(req)
	r.Header.Set("Authorization", "Bearer "+b.token())
	return b.base.RoundTrip(r)
}

// WrappedRoundTripper lets client-go see through to the shared transport.
func (b *bearer) WrappedRoundTripper() http.RoundTripper { return b.base }
