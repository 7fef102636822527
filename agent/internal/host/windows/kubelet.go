package windows

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

const (
	// kubeletHealthz is the kubelet's healthz endpoint at its defaults
	// (healthzBindAddress 127.0.0.1, healthzPort 10248): it needs no
	// credentials, unlike the authenticated port 10250.
	kubeletHealthz = "http://127.0.0.1:10248/healthz"
	// kubeletHealthTimeout: a kubelet that takes longer is not healthy
	// enough to trust a containerd swap to.
	kubeletHealthTimeout = 5 * time.Second
)

// kubeletHealthy asks the kubelet's healthz endpoint at url and wants 200
// "ok". A kubelet whose own checks fail answers 500 with the failed check,
// which the error carries.
func kubeletHealthy(ctx context.Context, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, kubeletHealthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	// The answer is "ok" or a short list of failed checks; more is not a
	// kubelet.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return fmt.Errorf("GET %s: reading the answer: %w", url, err)
	}
	text := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK || text != "ok" {
		return fmt.Errorf("GET %s: %s %q, not 200 \"ok\"", url, resp.Status, text)
	}
	return nil
}
