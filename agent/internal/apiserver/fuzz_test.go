package apiserver

import (
	"net/url"
	"testing"
)

// The agent sends its token wherever Choose says: the setting as written, an
// https server the client can dial from the kubelet's kubeconfig (a file on
// the host anyone with the node may have written), or else the Service,
// never a server the client cannot reach while the Service would answer.
func FuzzChoose(f *testing.F) {
	f.Add([]byte(kubeletKubeconfigText), "")
	f.Add([]byte(kubeletKubeconfigText), "api.example.com:6443")
	f.Add([]byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: https://a:6443, tls-server-name: k}}]\ncontexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n"), "")
	f.Fuzz(func(t *testing.T, kubeconfig []byte, setting string) {
		env := map[string]string{"WINPOOL_API_SERVER": setting, "WINPOOL_KUBELET_KUBECONFIG": "kubelet", "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
		ep, err := Choose(func(k string) string { return env[k] }, func(string) ([]byte, error) { return kubeconfig, nil })
		switch {
		case err != nil:
			t.Fatalf("Choose: %v", err)
		case setting != "":
			if ep.From != FromSetting || ep.Host != URL(setting) || ep.ServerName != "" {
				t.Fatalf("WINPOOL_API_SERVER=%q chose %+v", setting, ep)
			}
		case ep.From == FromKubelet:
			if u, err := url.Parse(ep.Host); err != nil || u.Scheme != "https" || u.Hostname() == "" {
				t.Fatalf("chose %+v, which is no https server (%v)", ep, err)
			}
		case ep != Endpoint{Host: "https://10.0.0.1:443", From: FromService}:
			t.Fatalf("chose %+v", ep)
		}
	})
}
