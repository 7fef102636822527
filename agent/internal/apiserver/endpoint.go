// Package apiserver chooses where the agent reaches the API server. The
// agent (cmd/winpool-agent) and the simulated fleet, which plays each
// node's routes, make the same choice with it.
package apiserver

import (
	"errors"
	"net"
	"net/url"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
)

// Where an Endpoint came from.
const (
	FromSetting = "WINPOOL_API_SERVER"
	FromKubelet = "the kubelet's kubeconfig"
	FromService = "the kubernetes Service"
)

// Endpoint is the API server's URL, the name its certificate is checked
// against ("" for the URL's host), and where the choice came from.
type Endpoint struct {
	Host, ServerName, From string
}

// Choose is WINPOOL_API_SERVER when set, else where the node's kubelet
// reaches the API server (the server of the kubelet's own kubeconfig on the
// host: its URL only, never its credentials), else the kubernetes Service.
//
// The Service comes last because of the first minutes after a reboot: its
// ClusterIP works only once kube-proxy has programmed its HNS load balancer
// on this node (minutes on Windows Server 2019 with thousands of Services),
// and every report the agent makes then would wait for it. The kubelet's
// endpoint answers as soon as the kubelet does, and the API server's
// certificate names it (the kubelet verifies it with the same cluster CA).
func Choose(getenv func(string) string, read func(string) ([]byte, error)) (Endpoint, error) {
	if s := URL(getenv("WINPOOL_API_SERVER")); s != "" {
		return Endpoint{Host: s, From: FromSetting}, nil
	}
	if s, name := KubeletServer(read, KubeletKubeconfigs(getenv)); s != "" {
		return Endpoint{Host: s, ServerName: name, From: FromKubelet}, nil
	}
	h, p := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if h == "" || p == "" {
		return Endpoint{}, errors.New("neither WINPOOL_API_SERVER, a kubelet kubeconfig on the host, nor KUBERNETES_SERVICE_HOST/PORT: the agent does not know the API server")
	}
	return Endpoint{Host: "https://" + net.JoinHostPort(h, p), From: FromService}, nil
}

// KubeletKubeconfigs are where the kubelet's kubeconfig lives on the
// Windows node setups winpool meets, or WINPOOL_KUBELET_KUBECONFIG alone
// ("none": look for none, and use the kubernetes Service).
func KubeletKubeconfigs(getenv func(string) string) []string {
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

// KubeletServer is the https server (dialable) of the current context of the
// first of paths that reads as a kubeconfig, and the name its certificate is
// checked against when the kubeconfig sets one ("" when no file reads). Nothing else
// of the file is used: the agent keeps its own identity, and trusts only the
// cluster CA of its ServiceAccount.
func KubeletServer(read func(string) ([]byte, error), paths []string) (server, tlsServerName string) {
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
		if c, ok := cfg.Clusters[ctx.Cluster]; ok && dialable(c.Server) {
			return c.Server, c.TLSServerName
		}
	}
	return "", ""
}

// dialable: an https URL with a host. A server without one ("https://:6443")
// would fail every request of the agent's while the Service would answer.
func dialable(server string) bool {
	u, err := url.Parse(server)
	return strings.HasPrefix(server, "https://") && err == nil && u.Hostname() != ""
}

// URL accepts "host:port" or a URL.
func URL(s string) string {
	if s == "" || strings.Contains(s, "://") {
		return s
	}
	return "https://" + s
}
