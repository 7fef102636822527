package windows

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestKubeletHealthy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		wantErr string // "" wants nil
	}{
		{"healthy", 200, "ok", ""},
		{"healthy, trailing newline", 200, "ok\n", ""},
		{"a check fails", 500, "[-]syncloop failed: reason withheld\nhealthz check failed\n", "500"},
		{"200 but not ok", 200, "starting", `"starting"`},
		{"ok but not 200", 503, "ok", "503"},
		{"not a kubelet", 404, "404 page not found", "404"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" || r.Method != http.MethodGet {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(tc.status)
			w.Write([]byte(tc.body))
		}))
		err := kubeletHealthy(context.Background(), srv.Client(), srv.URL+"/healthz")
		srv.Close()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: kubeletHealthy = %v, want nil", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: kubeletHealthy = %v, want an error with %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestKubeletHealthyGivesUp(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	// The caller's deadline cuts the wait as well as the 5 s bound.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := kubeletHealthy(ctx, srv.Client(), srv.URL+"/healthz")
	if err == nil || time.Since(start) > kubeletHealthTimeout {
		t.Fatalf("kubeletHealthy on a hung kubelet = %v after %v, want an error before %v", err, time.Since(start), kubeletHealthTimeout)
	}
}

func TestKubeletHealthzURL(t *testing.T) {
	if kubeletHealthz != "http://127.0.0.1:10248/healthz" {
		t.Errorf("kubeletHealthz = %q, want the kubelet's default healthz endpoint", kubeletHealthz)
	}
}
