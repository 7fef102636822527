package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRestConfig(t *testing.T) {
	sandbox := t.TempDir()
	sa := filepath.Join(sandbox, filepath.FromSlash(serviceAccountDir))
	os.MkdirAll(sa, 0o700)
	os.WriteFile(filepath.Join(sa, "token"), []byte("t"), 0o600)
	base := map[string]string{"CONTAINER_SANDBOX_MOUNT_POINT": sandbox, "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	for _, tc := range []struct {
		name, apiServer, wantHost string
	}{
		{"the kubernetes Service by default", "", "https://10.0.0.1:443"},
		{"WINPOOL_API_SERVER as host:port", "api.example.com:6443", "https://api.example.com:6443"},
		{"WINPOOL_API_SERVER as a URL", "https://10.1.2.3:6443", "https://10.1.2.3:6443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{"WINPOOL_API_SERVER": tc.apiServer}
			for k, v := range base {
				e[k] = v
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
		if k == "CONTAINER_SANDBOX_MOUNT_POINT" {
			return sandbox
		}
		return ""
	}); err == nil {
		t.Error("no API server address at all: want an error")
	}
}
