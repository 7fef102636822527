package fakewin

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"

	"winpool.dev/agent/internal/host/windows"
)

// network is how the machine reaches others: its named pipes, the
// kubelet's healthz on loopback, containerd's release downloads (served
// here in GitHub's layout, as a mirror would), and the update sources.
type network struct{ m *Machine }

func (n network) Dial(ctx context.Context, _, addr string) (net.Conn, error) {
	n.m.mu.Lock()
	why := n.m.unreach
	n.m.mu.Unlock()
	if why != "" {
		return nil, fmt.Errorf("dial tcp %s: %w (%s)", addr, errUnreachable, why)
	}
	if h, _, err := net.SplitHostPort(addr); err == nil && slices.Contains(n.m.o.Firewalled, h) {
		return nil, fmt.Errorf("dial tcp %s: %w (a firewall drops it)", addr, errUnreachable)
	}
	a, b := net.Pipe()
	go func() { <-ctx.Done(); b.Close() }()
	if addr == n.m.o.WinHTTPProxy {
		go n.proxy(b)
	}
	return a, nil
}

// proxy answers one CONNECT as the machine's WinHTTP proxy does.
func (n network) proxy(c net.Conn) {
	defer c.Close()
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	status := http.StatusOK
	if n.m.o.ProxyAnswer != nil {
		status = n.m.o.ProxyAnswer(req.Host)
	}
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", status, http.StatusText(status))
}

func (n network) HTTP() *http.Client { return &http.Client{Transport: web{n.m}} }

func (n network) WinHTTPProxy() (windows.WinHTTPProxyConfig, error) {
	return windows.WinHTTPProxyConfig{Proxy: n.m.o.WinHTTPProxy}, nil
}

func (n network) DialPipe(ctx context.Context, pipe string) (net.Conn, error) {
	return n.m.dialPipe(ctx, pipe)
}

// web answers HTTP as the machine's network does.
type web struct{ m *Machine }

var releaseFile = regexp.MustCompile(`^/v([0-9][^/]*)/containerd-([^/]+)-windows-amd64\.tar\.gz(\.sha256sum)?$`)

func (w web) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host == "127.0.0.1:10248" {
		return w.kubelet(r)
	}
	w.m.mu.Lock()
	why := w.m.unreach
	w.m.mu.Unlock()
	if why != "" {
		return nil, fmt.Errorf("dial tcp %s: %w (%s)", r.URL.Host, errUnreachable, why)
	}
	p := strings.TrimPrefix(r.URL.Path, "/containerd/containerd/releases/download")
	if g := releaseFile.FindStringSubmatch(p); r.URL.Host == "github.com" && g != nil && g[1] == g[2] {
		archive := containerdArchive(g[1])
		if g[3] == "" {
			return w.download(r, p, archive), nil
		}
		sum := sha256.Sum256(archive)
		return answer(r, http.StatusOK, []byte(hex.EncodeToString(sum[:])+"  "+path.Base(strings.TrimSuffix(p, ".sha256sum"))+"\n")), nil
	}
	return answer(r, http.StatusNotFound, []byte("Not Found")), nil
}

// download answers a GET of a file: the rest of it for a Range request
// naming its ETag (If-Range), else all of it, cut mid-body the first
// CutDownloads times.
func (w web) download(r *http.Request, file string, body []byte) *http.Response {
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	var from int64
	if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-", &from); err == nil && r.Header.Get("If-Range") == etag && from > 0 && from < int64(len(body)) {
		w.m.mu.Lock()
		w.m.resumed++
		w.m.mu.Unlock()
		resp := answer(r, http.StatusPartialContent, body[from:])
		resp.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, len(body)-1, len(body)))
		resp.Header.Set("ETag", etag)
		return resp
	}
	resp := answer(r, http.StatusOK, body)
	resp.Header.Set("ETag", etag)
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	if w.m.cuts == nil {
		w.m.cuts = map[string]int{}
	}
	if w.m.cuts[file] < w.m.o.CutDownloads {
		w.m.cuts[file]++
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[:len(body)/2]), errReader{errConnectionReset}))
	}
	return resp
}

// errConnectionReset is what a transfer cut by a proxy ends with.
var errConnectionReset = errors.New("read tcp: wsarecv: An existing connection was forcibly closed by the remote host.")

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// kubelet is its healthz: "ok" while the kubelet service runs.
func (w web) kubelet(r *http.Request) (*http.Response, error) {
	w.m.mu.Lock()
	up, ok := w.m.runs("kubelet")
	up = up || !ok
	w.m.mu.Unlock()
	if !up {
		return nil, fmt.Errorf("dial tcp 127.0.0.1:10248: connectex: No connection could be made because the target machine actively refused it")
	}
	return answer(r, http.StatusOK, []byte("ok")), nil
}

func answer(r *http.Request, status int, body []byte) *http.Response {
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: r}
}

// containerdArchive is a containerd Windows release: bin/ with its
// programs, containerd.exe holding its --version line.
func containerdArchive(v string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{
		{"bin/containerd.exe", containerdLine(v)},
		{"bin/containerd-shim-runhcs-v1.exe", "containerd-shim-runhcs-v1 " + v},
		{"bin/ctr.exe", "ctr " + v},
	} {
		_ = tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o755, Size: int64(len(f.body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(f.body))
	}
	_ = tw.Close()
	_ = gz.Close()
	return buf.Bytes()
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
