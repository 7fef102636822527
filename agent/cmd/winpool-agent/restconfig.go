package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// serviceAccountDir is where the kubelet mounts the pod's token and CA.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// env is the part of the environment restConfig reads (os.Getenv in main).
type env func(string) string

// restConfig is KUBECONFIG when set, else the pod's own identity: its
// ServiceAccount token (a file client-go re-reads as the kubelet rotates it)
// and the cluster CA, with the API server at WINPOOL_API_SERVER when set and
// at the kubernetes Service otherwise.
//
// WINPOOL_API_SERVER exists for the first minutes after a reboot: the
// kubernetes Service's ClusterIP works only once kube-proxy has programmed its
// HNS load balancer on this node, which may come after the agent starts. The
// real endpoint must be one the API server's certificate names.
//
// A HostProcess container on containerd before 1.7 sees its volumes under
// %CONTAINER_SANDBOX_MOUNT_POINT% rather than at their paths; the token is
// looked for there too.
func restConfig(getenv env) (*rest.Config, error) {
	if path := getenv("KUBECONFIG"); path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, err
		}
		if s := getenv("WINPOOL_API_SERVER"); s != "" {
			cfg.Host = apiURL(s)
		}
		return cfg, nil
	}
	dir := serviceAccountDir
	if _, err := os.Stat(filepath.Join(dir, "token")); err != nil {
		if root := getenv("CONTAINER_SANDBOX_MOUNT_POINT"); root != "" {
			dir = filepath.Join(root, filepath.FromSlash(serviceAccountDir))
		}
	}
	token, ca := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	if _, err := os.Stat(token); err != nil {
		return nil, fmt.Errorf("no ServiceAccount token at %s (is automountServiceAccountToken off?): %w", token, err)
	}
	host := apiURL(getenv("WINPOOL_API_SERVER"))
	if host == "" {
		h, p := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
		if h == "" || p == "" {
			return nil, errors.New("neither WINPOOL_API_SERVER nor KUBERNETES_SERVICE_HOST/PORT is set: the agent does not know the API server")
		}
		host = "https://" + net.JoinHostPort(h, p)
	}
	return &rest.Config{
		Host:            host,
		BearerTokenFile: token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: ca},
	}, nil
}

// apiURL accepts "host:port" or a URL.
func apiURL(s string) string {
	if s == "" || strings.Contains(s, "://") {
		return s
	}
	return "https://" + s
}
