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
// and the cluster CA, with the API server at WINPOOL_API_SERVER when set,
// else where the node's kubelet reaches it (the server of the kubelet's own
// kubeconfig on the host: its URL only, never its credentials), else at the
// kubernetes Service.
//
// The Service comes last because of the first minutes after a reboot: its
// ClusterIP works only once kube-proxy has programmed its HNS load balancer
// on this node (minutes on Windows Server 2019 with thousands of Services),
// and every report the agent makes then would wait for it. The kubelet's
// endpoint answers as soon as the kubelet does, and the API server's
// certificate names it (the kubelet verifies it with the same cluster CA).
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
	host, serverName := apiURL(getenv("WINPOOL_API_SERVER")), ""
	if host == "" {
		host, serverName = kubeletServer(os.ReadFile, kubeletKubeconfigs(getenv))
	}
	if host == "" {
		h, p := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
		if h == "" || p == "" {
			return nil, errors.New("neither WINPOOL_API_SERVER, a kubelet kubeconfig on the host, nor KUBERNETES_SERVICE_HOST/PORT: the agent does not know the API server")
		}
		host = "https://" + net.JoinHostPort(h, p)
	}
	return &rest.Config{
		Host:            host,
		BearerTokenFile: token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: ca, ServerName: serverName},
	}, nil
}

// kubeletKubeconfigs are where the kubelet's kubeconfig lives on the
// Windows node setups winpool meets, or WINPOOL_KUBELET_KUBECONFIG alone
// ("none": look for none, and use the kubernetes Service).
func kubeletKubeconfigs(getenv env) []string {
	switch p := getenv("WINPOOL_KUBELET_KUBECONFIG"); p {
	case "none":
		return nil
	case "":
	default:
		return []string{p}
	}
	return []string{
		`C:\k\config`,                                      // AKS, sig-windows-tools
		`C:\ProgramData\kubernetes\kubeconfig`,             // EKS
		`C:\var\lib\rancher\rke2\agent\kubelet.kubeconfig`, // RKE2
		`C:\etc\kubernetes\kubelet.conf`,                   // kubeadm
	}
}

// kubeletServer is the https server of the current context of the first of
// paths that reads as a kubeconfig, and the name its certificate is checked
// against when the kubeconfig sets one ("" when no file reads). Nothing else
// of the file is used: the agent keeps its own identity, and trusts only the
// cluster CA of its ServiceAccount.
func kubeletServer(read func(string) ([]byte, error), paths []string) (server, tlsServerName string) {
	for _, p := range paths {
		b, err := read(p)
		if err != nil {
			continue
		}
		cfg, err := clientcmd.Load(b)
		if err != nil {
			continue
		}
		ctx, ok := cfg.Contexts[cfg.CurrentContext]
		if !ok {
			continue
		}
		if c, ok := cfg.Clusters[ctx.Cluster]; ok && strings.HasPrefix(c.Server, "https://") {
			return c.Server, c.TLSServerName
		}
	}
	return "", ""
}

// apiURL accepts "host:port" or a URL.
func apiURL(s string) string {
	if s == "" || strings.Contains(s, "://") {
		return s
	}
	return "https://" + s
}
