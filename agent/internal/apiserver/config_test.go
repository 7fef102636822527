package apiserver

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// kubeletKubeconfigText is a kubelet's kubeconfig as AKS writes it: the agent
// takes its server, and nothing else (the client certificate stays the kubelet's).
var kubeletKubeconfigText = func() string {
	b, err := os.ReadFile("testdata/aks-kubelet.kubeconfig")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func TestRestConfig(t *testing.T) {
	sandbox := t.TempDir()
	kubeletKubeconfig := filepath.Join(sandbox, "config")
	os.WriteFile(kubeletKubeconfig, []byte(kubeletKubeconfigText), 0o600)
	sa := filepath.Join(sandbox, filepath.FromSlash(ServiceAccountDir))
	os.MkdirAll(sa, 0o700)
	os.WriteFile(filepath.Join(sa, "token"), []byte("t"), 0o600)
	// The machine's environment, inherited by the HostProcess container: EKS
	// points KUBECONFIG at the kubelet's credentials; a proxy for downloads.
	base := map[string]string{"CONTAINER_SANDBOX_MOUNT_POINT": sandbox, "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443",
		"WINPOOL_KUBELET_KUBECONFIG": filepath.Join(sandbox, "no-kubelet-kubeconfig"),
		"KUBECONFIG":                 kubeletKubeconfig, "HTTPS_PROXY": "http://proxy.corp:3128", "HTTP_PROXY": "http://proxy.corp:3128"}
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
			cfg, err := Config(func(k string) string { return e[k] }, ServiceAccountDir)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost {
				t.Errorf("host %q, want %q", cfg.Host, tc.wantHost)
			}
			// The pod's own token and CA, from the sandbox mount point,
			// never the kubelet's kubeconfig that KUBECONFIG names.
			if cfg.BearerTokenFile != filepath.Join(sa, "token") || cfg.TLSClientConfig.CAFile != filepath.Join(sa, "ca.crt") {
				t.Errorf("token %q, CA %q; want the ServiceAccount's under %s", cfg.BearerTokenFile, cfg.TLSClientConfig.CAFile, sa)
			}
			if cfg.CertFile != "" || cfg.KeyFile != "" || len(cfg.CertData) > 0 {
				t.Errorf("client certificate %q/%d bytes: the kubelet's credentials", cfg.CertFile, len(cfg.CertData))
			}
			assertNoProxy(t, cfg)
		})
	}
	if _, err := Config(func(k string) string {
		switch k {
		case "CONTAINER_SANDBOX_MOUNT_POINT":
			return sandbox
		case "WINPOOL_KUBELET_KUBECONFIG":
			return "none"
		}
		return ""
	}, ServiceAccountDir); err == nil {
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
		if got, name := KubeletServer(read, tc.paths); got != tc.want || name != tc.serverName {
			t.Errorf("kubeletServer(%v) = %q %q, want %q %q", tc.paths, got, name, tc.want, tc.serverName)
		}
	}
	if got := KubeletKubeconfigs(func(string) string { return "none" }); len(got) != 0 {
		t.Errorf("WINPOOL_KUBELET_KUBECONFIG=none looks at %v", got)
	}
}

// assertNoProxy: API requests go straight to the API server whatever proxy
// the machine's environment names.
func assertNoProxy(t *testing.T, cfg *rest.Config) {
	t.Helper()
	t.Setenv("HTTPS_PROXY", "http://proxy.corp:3128")
	req, _ := http.NewRequest(http.MethodGet, cfg.Host+"/api", nil)
	if cfg.Proxy == nil {
		t.Fatal("no Proxy set: client-go would use the environment's")
	}
	if u, err := cfg.Proxy(req); u != nil || err != nil {
		t.Errorf("API request proxied through %v (%v)", u, err)
	}
}

// WINPOOL_KUBECONFIG, for an agent run outside a pod, is the only kubeconfig read.
func TestAKubeconfigOnlyByItsOwnName(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "agent.kubeconfig")
	os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://10.9.9.9:6443, insecure-skip-tls-verify: true}\n"+
		"users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"), 0o600)
	cfg, err := Config(func(k string) string {
		return map[string]string{"WINPOOL_KUBECONFIG": kc, "WINPOOL_API_SERVER": "api.example.com:6443"}[k]
	}, ServiceAccountDir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://api.example.com:6443" {
		t.Errorf("host %q", cfg.Host)
	}
	assertNoProxy(t, cfg)
}

// The variables the agent's API client does not follow are named once each,
// whichever spelling the environment has.
func TestIgnoredNamesEachVariableOnce(t *testing.T) {
	env := map[string]string{"KUBECONFIG": `C:\ProgramData\kubernetes\kubeconfig`, "HTTPS_PROXY": "http://p:3128", "https_proxy": "http://p:3128", "http_proxy": "http://p:3128"}
	got := Ignored(func(k string) string { return env[k] })
	if want := []string{"KUBECONFIG", "HTTPS_PROXY", "http_proxy"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Ignored = %q, want %q", got, want)
	}
	if got := Ignored(func(string) string { return "" }); len(got) != 0 {
		t.Errorf("nothing set: %q", got)
	}
}
