package apiserver

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ServiceAccountDir is where the kubelet mounts the pod's token and CA.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Config is the pod's own identity: its ServiceAccount token (a file
// client-go re-reads as the kubelet rotates it) and the cluster CA, with the
// API server apiserver.Choose picks (the kubelet's endpoint before the
// kubernetes Service); WINPOOL_KUBECONFIG names a kubeconfig instead, for an
// agent run outside a pod. KUBECONFIG is never read: a HostProcess container
// inherits the machine's environment, and the EKS Windows AMI sets a
// machine-wide KUBECONFIG to the kubelet's credentials, so the agent would
// act as the kubelet (its Node writes, not its own RBAC and admission policy).
// Nor does the API client go through the machine's HTTP(S)_PROXY (an
// agent.extraEnv proxy is for the host's downloads): the API server is the
// cluster's, and a proxy in between would see the agent's token.
//
// A HostProcess container on containerd before 1.7 sees its volumes under
// %CONTAINER_SANDBOX_MOUNT_POINT% rather than at their paths; the token is
// looked for there too. getenv is the process's environment (os.Getenv), saDir
// where the token is mounted (ServiceAccountDir).
func Config(getenv func(string) string, saDir string) (*rest.Config, error) {
	if path := getenv("WINPOOL_KUBECONFIG"); path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, err
		}
		if s := getenv("WINPOOL_API_SERVER"); s != "" {
			cfg.Host = URL(s)
		}
		cfg.Proxy = noProxy
		return cfg, nil
	}
	dir := saDir
	if _, err := os.Stat(filepath.Join(dir, "token")); err != nil {
		if root := getenv("CONTAINER_SANDBOX_MOUNT_POINT"); root != "" {
			dir = filepath.Join(root, filepath.FromSlash(saDir))
		}
	}
	token, ca := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	if _, err := os.Stat(token); err != nil {
		return nil, fmt.Errorf("no ServiceAccount token at %s (is automountServiceAccountToken off?): %w", token, err)
	}
	ep, err := Choose(getenv, os.ReadFile)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            ep.Host,
		BearerTokenFile: token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: ca, ServerName: ep.ServerName},
		Proxy:           noProxy,
	}, nil
}

// Ignored names the variables of getenv that Config does not follow although
// a client built the usual way would (KUBECONFIG, the proxies), for the log.
func Ignored(getenv func(string) string) []string {
	var out []string
	for _, names := range [][]string{{"KUBECONFIG"}, {"HTTPS_PROXY", "https_proxy"}, {"HTTP_PROXY", "http_proxy"}} {
		// Windows' environment ignores case: both spellings are one variable there.
		for _, v := range names {
			if getenv(v) != "" {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

// noProxy sends every API request straight to the API server.
func noProxy(*http.Request) (*url.URL, error) { return nil, nil }
