package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"winpool.dev/agent/internal/apiserver"
)

// A kubelet's kubeconfig as AKS writes it: the agent takes its server, and
// nothing else (the client certificate stays the kubelet's).
const kubeletKubeconfigText = `apiVersion: v1
kind: Config
clusters:
- name: localcluster
  cluster:
    certificate-authority: C:\k\ca.crt
    server: https://10.240.0.4:6443
users:
- name: client
  user:
    client-certificate: C:\k\client.crt
    client-key: C:\k\client.key
contexts:
- name: localclustercontext
  context: {cluster: localcluster, user: client}
current-context: localclustercontext
`

func TestRestConfig(t *testing.T) {
	sandbox := t.TempDir()
	kubeletKubeconfig := filepath.Join(sandbox, "config")
	os.WriteFile(kubeletKubeconfig, []byte(kubeletKubeconfigText), 0o600)
	sa := filepath.Join(sandbox, filepath.FromSlash(serviceAccountDir))
	os.MkdirAll(sa, 0o700)
	os.WriteFile(filepath.Join(sa, "token"), []byte("t"), 0o600)
	base := map[string]string{"CONTAINER_SANDBOX_MOUNT_POINT": sandbox, "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443",
		"WINPOOL_KUBELET_KUBECONFIG": filepath.Join(sandbox, "no-kubelet-kubeconfig")}
	for _, tc := range []struct {
		name, apiServer, wantHost string
		kubelet                   bool // the node has a kubelet kubeconfig
	}{
		{"the kubernetes Service without a kubelet kubeconfig", "", "https://10.0.0.1:443", false},
		{"WINPOOL_API_SERVER as host:port", "api.example.com:6443", "https://api.example.com:6443", true},
		{"WINPOOL_API_SERVER as a URL", "https://10.1.2.3:6443", "https://10.1.2.3:6443", false},
		{"the kubelet's endpoint before the Service", "", "https://10.240.0.4:6443", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{"WINPOOL_API_SERVER": tc.apiServer}
			for k, v := range base {
				e[k] = v
			}
			if tc.kubelet {
				e["WINPOOL_KUBELET_KUBECONFIG"] = kubeletKubeconfig
			}
			cfg, err := restConfig(func(k string) string { return e[k] })
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost {
				t.Errorf("host %q, want %q", cfg.Host, tc.wantHost)
			}
			// The pod's own token and CA, from the sandbox mount point.
			if cfg.BearerTokenFile != filepath.Join(sa, "token") || cfg.TLSClientConfig.CAFile != filepath.Join(sa, "ca.crt") {
				t.Errorf("token %q, CA %q; want the ServiceAccount's under %s", cfg.BearerTokenFile, cfg.TLSClientConfig.CAFile, sa)
			}
		})
	}
	if _, err := restConfig(func(k string) string {
		switch k {
		case "CONTAINER_SANDBOX_MOUNT_POINT":
			return sandbox
		case "WINPOOL_KUBELET_KUBECONFIG":
			return "none"
		}
		return ""
	}); err == nil {
		t.Error("no API server address at all: want an error")
	}
}

func TestKubeletServer(t *testing.T) {
	files := map[string]string{
		"aks":        kubeletKubeconfigText,
		"garbage":    "{",
		"no-context": "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: https://a:6443}}]\n",
		"http":       strings.ReplaceAll(kubeletKubeconfigText, "https://10.240.0.4:6443", "http://10.240.0.4:8080"),
	}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	files["server-name"] = strings.ReplaceAll(kubeletKubeconfigText, "    server: https://10.240.0.4:6443", "    server: https://10.240.0.4:6443\n    tls-server-name: kubernetes")
	for _, tc := range []struct {
		paths            []string
		want, serverName string
	}{
		{[]string{"missing", "aks"}, "https://10.240.0.4:6443", ""},
		{[]string{"server-name"}, "https://10.240.0.4:6443", "kubernetes"},
		{[]string{"garbage", "no-context", "http"}, "", ""},
		{nil, "", ""},
	} {
		if got, name := apiserver.KubeletServer(read, tc.paths); got != tc.want || name != tc.serverName {
			t.Errorf("kubeletServer(%v) = %q %q, want %q %q", tc.paths, got, name, tc.want, tc.serverName)
		}
	}
	if got := apiserver.KubeletKubeconfigs(func(string) string { return "none" }); len(got) != 0 {
		t.Errorf("WINPOOL_KUBELET_KUBECONFIG=none looks at %v", got)
	}
}
