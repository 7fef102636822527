package fleet

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/net/http/httpproxy"

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

// agentIdentity is what an agent's API client is built from, as on a node:
// its pod's token, mounted at saDir, and the environment its HostProcess
// container sees (the pod's variables over the machine's).
type agentIdentity struct {
	node string
	// token is the pod's token now (the fleet renews it in memory); saDir
	// holds a token file standing for it, for the agent's choice to find.
	token     func() string
	saDir     string
	serviceUp func() bool
	// machineEnv is the machine's environment (nil: empty).
	machineEnv func(string) string
}

// forToken is node's agent's client ([agentClients.configFor]).
func (c *agentClients) forToken(id agentIdentity) (kubernetes.Interface, error) {
	cfg, err := c.configFor(id)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// configFor is the agent's API client configuration as the agent's own code
// builds it (apiserver.Config) from what its node gives it, played over the
// fleet's shared transport: the endpoint it chose (the kubelet's kubeconfig
// when the fleet wrote one, else the kubernetes Service, which answers only
// when serviceUp says so), the credential it chose (the pod's token, or
// whatever else it picked up), and the proxy it would go through.
func (c *agentClients) configFor(id agentIdentity) (*rest.Config, error) {
	h, p, _ := net.SplitHostPort(clusterIP)
	pod := map[string]string{"KUBERNETES_SERVICE_HOST": h, "KUBERNETES_SERVICE_PORT": p, "WINPOOL_KUBELET_KUBECONFIG": "none"}
	if c.kubeletKubeconfig != "" {
		pod["WINPOOL_KUBELET_KUBECONFIG"] = c.kubeletKubeconfig
	}
	getenv := func(k string) string {
		if v, ok := pod[k]; ok {
			return v
		}
		if id.machineEnv != nil {
			return id.machineEnv(k)
		}
		return ""
	}
	if err := os.MkdirAll(id.saDir, 0o700); err != nil {
		return nil, err
	}
	podToken := filepath.Join(id.saDir, "token")
	if err := os.WriteFile(podToken, []byte("the fleet sends the pod's token from memory\n"), 0o600); err != nil {
		return nil, err
	}
	chosen, err := apiserver.Config(getenv, id.saDir)
	if err != nil {
		return nil, err
	}
	token, err := credential(chosen, podToken, id.token)
	if err != nil {
		return nil, fmt.Errorf("the agent's API client: %w", err)
	}
	real, err := url.Parse(c.host)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:      chosen.Host,
		Transport: &bearer{base: c.base, token: token, service: serviceRoute{to: real, up: id.serviceUp}, proxy: proxyOf(chosen, getenv)},
		QPS:       agentQPS,
		Burst:     agentBurst,
		UserAgent: "winpool-agent/sim (" + id.node + ")",
	}, nil
}

// credential is the token the chosen configuration sends: the pod's (its
// mounted file), or another one it picked up (a kubeconfig's).
func credential(chosen *rest.Config, podTokenFile string, podToken func() string) (func() string, error) {
	switch {
	case chosen.BearerTokenFile == podTokenFile:
		return podToken, nil
	case chosen.BearerToken != "":
		return func() string { return chosen.BearerToken }, nil
	case chosen.BearerTokenFile != "":
		return func() string {
			b, _ := os.ReadFile(chosen.BearerTokenFile)
			return strings.TrimSpace(string(b))
		}, nil
	}
	return nil, errors.New("it carries no bearer token (the fleet plays no client certificates)")
}

// proxyOf is the proxy the chosen configuration sends a request through:
// its own Proxy, or when it has none, as net/http's ProxyFromEnvironment
// would over the node's environment.
func proxyOf(chosen *rest.Config, getenv func(string) string) func(*http.Request) (*url.URL, error) {
	if chosen.Proxy != nil {
		return chosen.Proxy
	}
	first := func(names ...string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	fromEnv := (&httpproxy.Config{
		HTTPProxy:  first("HTTP_PROXY", "http_proxy"),
		HTTPSProxy: first("HTTPS_PROXY", "https_proxy"),
		NoProxy:    first("NO_PROXY", "no_proxy"),
	}).ProxyFunc()
	return func(r *http.Request) (*url.URL, error) { return fromEnv(r.URL) }
}

// bearer authenticates each request with the token current at that moment,
// so a renewed token takes effect without rebuilding the client.
type bearer struct {
	base    http.RoundTripper
	token   func() string
	service serviceRoute
	// proxy: the proxy the agent would send a request through (nil: none).
	proxy func(*http.Request) (*url.URL, error)
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
	if b.proxy != nil {
		if via, err := b.proxy(r); err != nil || via != nil {
			return nil, viaProxy(via, err)
		}
	}
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
	return path, writeKubeconfig(path, server, "")
}

// viaProxy is what a request the agent would send through a proxy meets:
// the proxy refusing, or the fleet saying it plays none (an agent's API
// client must go straight to the API server; apiserver.Config).
func viaProxy(via *url.URL, err error) error {
	if err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", via.Host, 2*time.Second)
	if err != nil {
		return &net.OpError{Op: "proxyconnect", Net: "tcp", Err: err}
	}
	c.Close()
	return fmt.Errorf("the agent's API request would go through the proxy %s, which the fleet does not play", via.Redacted())
}

// writeKubeconfig writes a kubeconfig naming server and sending token, as a
// kubelet's credentials would be.
func writeKubeconfig(path, server, token string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster: {server: %q, insecure-skip-tls-verify: true}
contexts:
- name: kubelet
  context: {cluster: cluster, user: kubelet}
current-context: kubelet
users:
- name: kubelet
  user: {token: %q}
`, server, token)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// WrappedRoundTripper lets client-go see through to the shared transport.
func (b *bearer) WrappedRoundTripper() http.RoundTripper { return b.base }
