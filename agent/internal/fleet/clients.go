package fleet

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"winpool.dev/agent/internal/apiserver"
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
	// kubeletKubeconfig is the machines' kubelet kubeconfig, naming the API
	// server's URL (only that is in it: the agent reads nothing else).
	kubeletKubeconfig string
}

// clusterIP is the kubernetes Service's address as the agents' environment
// gives it (KUBERNETES_SERVICE_HOST/PORT). The fleet plays kube-proxy: a
// request to it goes to the API server once the node's HNS load balancer for
// it exists (FaultSlowAPI: not for a long while after each boot).
const clusterIP = "10.96.0.1:443"

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

// forToken is node's agent's client, on the endpoint the agent itself
// would pick (apiserver.Choose) from a node's environment: the kubelet's
// kubeconfig when the fleet wrote one, else the kubernetes Service, which
// answers only when serviceUp says so.
func (c *agentClients) forToken(node string, token func() string, serviceUp func() bool) (kubernetes.Interface, error) {
	cfg, err := c.configFor(node, token, serviceUp)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// configFor is the configuration of forToken's client, for the agent's
// other clients (its reports) to share.
func (c *agentClients) configFor(node string, token func() string, serviceUp func() bool) (*rest.Config, error) {
	h, p, _ := net.SplitHostPort(clusterIP)
	env := map[string]string{"KUBERNETES_SERVICE_HOST": h, "KUBERNETES_SERVICE_PORT": p, "WINPOOL_KUBELET_KUBECONFIG": "none"}
	if c.kubeletKubeconfig != "" {
		env["WINPOOL_KUBELET_KUBECONFIG"] = c.kubeletKubeconfig
	}
	ep, err := apiserver.Choose(func(k string) string { return env[k] }, os.ReadFile)
	if err != nil {
		return nil, err
	}
	real, err := url.Parse(c.host)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:      ep.Host,
		Transport: &bearer{base: c.base, token: token, service: serviceRoute{to: real, up: serviceUp}},
		QPS:       agentQPS,
		Burst:     agentBurst,
		UserAgent: "winpool-agent/sim (" + node + ")",
	}, nil
}

// bearer authenticates each request with the token current at that moment,
// so a renewed token takes effect without rebuilding the client.
type bearer struct {
	base    http.RoundTripper
	token   func() string
	service serviceRoute
}

// serviceRoute is kube-proxy's load balancer for the kubernetes Service on
// one node: to the API server's address, when up.
type serviceRoute struct {
	to *url.URL
	up func() bool
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	// A RoundTripper must not change the caller's request.
	r := utilnet.CloneRequest(req)
	r.Header.Set("Authorization", "Bearer "+b.token())
	if r.URL.Host == clusterIP {
		if b.service.up != nil && !b.service.up() {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connect to %s: no HNS load balancer for the kubernetes Service yet (kube-proxy has not synced since the boot)", clusterIP)}
		}
		r.URL.Scheme, r.URL.Host = b.service.to.Scheme, b.service.to.Host
	}
	return b.base.RoundTrip(r)
}

// writeKubeletKubeconfig writes what a node's kubelet kubeconfig tells the
// agent: the API server's URL, in dir.
func writeKubeletKubeconfig(dir, server string) (string, error) {
	path := filepath.Join(dir, "kubelet.kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster: {server: %q}
contexts:
- name: kubelet
  context: {cluster: cluster, user: kubelet}
current-context: kubelet
users:
- name: kubelet
  user: {}
`, server)
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// WrappedRoundTripper lets client-go see through to the shared transport.
func (b *bearer) WrappedRoundTripper() http.RoundTripper { return b.base }
