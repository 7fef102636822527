package windows

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
)

func windowsUpdateRequest() host.UpdateRequest {
	return host.UpdateRequest{Revision: "r1", Target: target, Source: config.SourceWindowsUpdate}
}

// TestSourceProbes: which sources a request has, in install order, what
// each is called and where its check goes.
func TestSourceProbes(t *testing.T) {
	// Windows Update: its two service hosts and where its payloads come
	// from, each dialled, or through the proxy a tunnel asked of it.
	wu := func(via string) []sourceProbe {
		var out []sourceProbe
		for _, name := range []string{"Windows Update (slscr.update.microsoft.com)", "Windows Update (fe3cr.delivery.mp.microsoft.com)",
			"Windows Update payloads (download.windowsupdate.com)"} {
			h := name[strings.Index(name, "(")+1 : len(name)-1]
			p := sourceProbe{Name: name, Kind: probeDial, Target: h + ":443"}
			if via != "" {
				p.Name += " via WinHTTP proxy " + via
				p.Kind, p.Via = probeTunnel, via
			}
			if h == windowsUpdatePayloadHost {
				p.Kind, p.Target = probePayload, h
			}
			out = append(out, p)
		}
		return out
	}
	corpProxy := WinHTTPProxyConfig{Proxy: "proxy.corp:8080", Bypass: "<local>;*.corp"}
	for _, tc := range []struct {
		name      string
		req       host.UpdateRequest
		policy    wuPolicy
		policyErr error
		proxy     WinHTTPProxyConfig
		proxyErr  error
		want      []sourceProbe
	}{
		{"packages, in install order", packagesRequest(1), wuPolicy{}, nil, WinHTTPProxyConfig{}, nil, []sourceProbe{
			{Name: "https://example.com/ssu.cab", Kind: probeURL, Target: "https://example.com/ssu.cab"},
			{Name: `C:\packages\lcu.msu`, Kind: probePath, Target: `C:\packages\lcu.msu`},
		}},
		{"packages ignore the WSUS policy", packagesRequest(1), wuPolicy{WUServer: "http://wsus.corp:8530", UseWUServer: 1}, nil, corpProxy, nil, []sourceProbe{
			{Name: "https://example.com/ssu.cab", Kind: probeURL, Target: "https://example.com/ssu.cab"},
			{Name: `C:\packages\lcu.msu`, Kind: probePath, Target: `C:\packages\lcu.msu`},
		}},
		{"Windows Update, no policy", windowsUpdateRequest(), wuPolicy{}, nil, WinHTTPProxyConfig{}, nil, wu("")},
		{"the default source is Windows Update", host.UpdateRequest{Target: target}, wuPolicy{}, nil, WinHTTPProxyConfig{}, nil, wu("")},
		{"WSUS on its own port", windowsUpdateRequest(), wuPolicy{WUServer: "http://wsus.corp:8530", UseWUServer: 1}, nil, WinHTTPProxyConfig{}, nil,
			[]sourceProbe{{Name: "WSUS http://wsus.corp:8530", Kind: probeDial, Target: "wsus.corp:8530"}}},
		{"WSUS over https, port from the scheme", windowsUpdateRequest(), wuPolicy{WUServer: "https://wsus.corp", UseWUServer: 1}, nil, WinHTTPProxyConfig{}, nil,
			[]sourceProbe{{Name: "WSUS https://wsus.corp", Kind: probeDial, Target: "wsus.corp:443"}}},
		{"WSUS over http, port from the scheme", windowsUpdateRequest(), wuPolicy{WUServer: " HTTP://wsus.corp/ ", UseWUServer: 1}, nil, WinHTTPProxyConfig{}, nil,
			[]sourceProbe{{Name: "WSUS HTTP://wsus.corp/", Kind: probeDial, Target: "wsus.corp:80"}}},
		{"WSUS written without a scheme", windowsUpdateRequest(), wuPolicy{WUServer: "wsus.corp:8530", UseWUServer: 1}, nil, WinHTTPProxyConfig{}, nil,
			[]sourceProbe{{Name: "WSUS wsus.corp:8530", Kind: probeDial, Target: "wsus.corp:8530"}}},
		{"WSUS by IPv6 address", windowsUpdateRequest(), wuPolicy{WUServer: "http://[fd00::5]:8530", UseWUServer: 1}, nil, WinHTTPProxyConfig{}, nil,
			[]sourceProbe{{Name: "WSUS http://[fd00::5]:8530", Kind: probeDial, Target: "[fd00::5]:8530"}}},
		{"a WUServer left behind with UseWUServer 0 is not used", windowsUpdateRequest(), wuPolicy{WUServer: "http://wsus.corp:8530"}, nil, WinHTTPProxyConfig{}, nil, wu("")},
		{"UseWUServer 2 is not 1", windowsUpdateRequest(), wuPolicy{WUServer: "http://wsus.corp:8530", UseWUServer: 2}, nil, WinHTTPProxyConfig{}, nil, wu("")},
		{"UseWUServer 1 without a WUServer", windowsUpdateRequest(), wuPolicy{UseWUServer: 1}, nil, WinHTTPProxyConfig{}, nil,
			[]sourceProbe{{Name: "WSUS", Err: `the node's policy sets UseWUServer to 1 (HKLM\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate\AU) but names no WUServer (HKLM\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate)`}}},
		{"a WUServer that is no http URL", windowsUpdateRequest(), wuPolicy{WUServer: "ftp://wsus.corp", UseWUServer: 1}, nil, WinHTTPProxyConfig{}, nil,
			[]sourceProbe{{Name: "WSUS ftp://wsus.corp", Err: `WUServer (HKLM\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate) "ftp://wsus.corp" is neither an http:// nor an https:// URL`}}},
		{"an unreadable policy", windowsUpdateRequest(), wuPolicy{}, errors.New("Access is denied."), WinHTTPProxyConfig{}, nil,
			[]sourceProbe{{Name: "Windows Update or WSUS", Err: `reading the node's Windows Update policy (HKLM\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate): Access is denied.`}}},
		{"Windows Update through the WinHTTP proxy", windowsUpdateRequest(), wuPolicy{}, nil, corpProxy, nil, wu("proxy.corp:8080")},
		{"WSUS on the proxy's bypass list", windowsUpdateRequest(), wuPolicy{WUServer: "http://wsus.corp:8530", UseWUServer: 1}, nil, corpProxy, nil,
			[]sourceProbe{{Name: "WSUS http://wsus.corp:8530", Kind: probeDial, Target: "wsus.corp:8530"}}},
		{"WSUS by short name is <local>", windowsUpdateRequest(), wuPolicy{WUServer: "http://wsus:8530", UseWUServer: 1}, nil, WinHTTPProxyConfig{Proxy: "proxy.corp:8080", Bypass: "<local>"}, nil,
			[]sourceProbe{{Name: "WSUS http://wsus:8530", Kind: probeDial, Target: "wsus:8530"}}},
		{"WSUS through the proxy", windowsUpdateRequest(), wuPolicy{WUServer: "http://wsus.example.net:8530", UseWUServer: 1}, nil, corpProxy, nil,
			[]sourceProbe{{Name: "WSUS http://wsus.example.net:8530 via WinHTTP proxy proxy.corp:8080", Kind: probeDial, Target: "proxy.corp:8080"}}},
		{"an unreadable proxy: dialled directly, and said", windowsUpdateRequest(), wuPolicy{WUServer: "http://wsus.corp:8530", UseWUServer: 1}, nil, WinHTTPProxyConfig{}, errors.New("The parameter is incorrect."),
			[]sourceProbe{{Name: "WSUS http://wsus.corp:8530 (WinHTTP proxy unreadable: The parameter is incorrect.; dialled directly)", Kind: probeDial, Target: "wsus.corp:8530"}}},
		{"an unknown source", host.UpdateRequest{Source: "Floppy"}, wuPolicy{}, nil, WinHTTPProxyConfig{}, nil,
			[]sourceProbe{{Name: `update source "Floppy"`, Err: "not a source the agent knows"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sourceProbes(tc.req, tc.policy, tc.policyErr, tc.proxy, tc.proxyErr)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("sourceProbes =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

// TestProxyFor: where WinHTTP sends a request, from `netsh winhttp set
// proxy` lists and bypass lists.
func TestProxyFor(t *testing.T) {
	for _, tc := range []struct {
		proxy, bypass, scheme, host, want string
	}{
		{"", "", "https", "fe3cr.delivery.mp.microsoft.com", ""},
		{"proxy.corp:8080", "", "https", "fe3cr.delivery.mp.microsoft.com", "proxy.corp:8080"},
		{"proxy.corp", "", "https", "fe3cr.delivery.mp.microsoft.com", "proxy.corp:80"},
		{"http://proxy.corp:3128", "", "http", "wsus.example.net", "proxy.corp:3128"},
		{"https://proxy.corp", "", "https", "wsus.example.net", "proxy.corp:443"},
		{"http=web.corp:80;https=secure.corp:8443", "", "https", "slscr.update.microsoft.com", "secure.corp:8443"},
		{"http=web.corp:80;https=secure.corp:8443", "", "http", "wsus.example.net", "web.corp:80"},
		{"http=web.corp:80", "", "https", "slscr.update.microsoft.com", ""},
		{"http=web.corp:80 other.corp:8080", "", "https", "slscr.update.microsoft.com", "other.corp:8080"},
		{"[fd00::1]:3128", "", "https", "slscr.update.microsoft.com", "[fd00::1]:3128"},
		{"proxy.corp:8080", "<local>", "http", "wsus", ""},
		{"proxy.corp:8080", "<local>", "http", "wsus.corp", "proxy.corp:8080"},
		{"proxy.corp:8080", "*.corp;10.*", "http", "wsus.site.corp", ""},
		{"proxy.corp:8080", "*.corp;10.*", "http", "10.1.2.3", ""},
		{"proxy.corp:8080", "*.corp;10.*", "http", "wsus.example.net", "proxy.corp:8080"},
		{"proxy.corp:8080", "WSUS.Example.NET", "http", "wsus.example.net", ""},
		{"proxy.corp:8080", "http://wsus.example.net", "http", "wsus.example.net", ""},
	} {
		p := WinHTTPProxyConfig{Proxy: tc.proxy, Bypass: tc.bypass}
		if got := p.proxyFor(tc.scheme, tc.host); got != tc.want {
			t.Errorf("proxy %q bypass %q: %s://%s goes to %q, want %q", tc.proxy, tc.bypass, tc.scheme, tc.host, got, tc.want)
		}
	}
}

func TestWSUSPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy     wuPolicy
		wantServer string
		wantUse    bool
	}{
		{wuPolicy{}, "", false},
		{wuPolicy{WUServer: "http://wsus.corp:8530"}, "", false},
		{wuPolicy{WUServer: "http://wsus.corp:8530", UseWUServer: 1}, "http://wsus.corp:8530", true},
		{wuPolicy{WUServer: "  ", UseWUServer: 1}, "", true},
		{wuPolicy{WUServer: "http://wsus.corp:8530", UseWUServer: 0xFFFFFFFF}, "", false},
	} {
		if s, use := tc.policy.wsus(); s != tc.wantServer || use != tc.wantUse {
			t.Errorf("%+v: wsus() = %q, %v; want %q, %v", tc.policy, s, use, tc.wantServer, tc.wantUse)
		}
	}
}

func TestHTTPStatusMeaning(t *testing.T) {
	for _, tc := range []struct {
		status         int
		head, ranged   bool // answered to HEAD, to the one-byte GET
		retriedWithGet bool
	}{
		{200, true, true, false},
		{204, true, true, false},
		{206, true, true, false},
		{304, false, false, true},
		{302, false, false, true},
		{401, false, false, true},
		{403, false, false, true},
		{404, false, false, true},
		{405, false, false, true},
		{410, false, false, true},
		{416, false, true, true},
		{500, false, false, true},
		{501, false, false, true},
		{503, false, false, true},
	} {
		if got := answered(tc.status, false); got != tc.head {
			t.Errorf("HEAD %d: answered = %v, want %v", tc.status, got, tc.head)
		}
		if got := answered(tc.status, true); got != tc.ranged {
			t.Errorf("GET bytes=0-0 %d: answered = %v, want %v", tc.status, got, tc.ranged)
		}
		if got := headRefused(tc.status); got != tc.retriedWithGet {
			t.Errorf("HEAD %d: asked again with GET = %v, want %v", tc.status, got, tc.retriedWithGet)
		}
	}
}

// packageServer answers as web servers and mirrors do: HEAD, a HEAD it
// refuses, redirects, errors, one that never answers.
func packageServer(t *testing.T) (*httptest.Server, *requestLog) {
	seen := &requestLog{}
	stall := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.Method + " " + r.URL.Path + " " + r.Header.Get("Range"))
		switch r.URL.Path {
		case "/kb.msu":
			w.WriteHeader(http.StatusOK)
		case "/forbidden.msu":
			w.WriteHeader(http.StatusForbidden)
		case "/old/kb.msu":
			http.Redirect(w, r, "/kb.msu", http.StatusFound)
		case "/nohead/kb.msu", "/nohead/missing.msu":
			if r.Method == http.MethodHead {
				w.WriteHeader(http.StatusMethodNotAllowed)
				return
			}
			if strings.HasSuffix(r.URL.Path, "missing.msu") {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Range", "bytes 0-0/3")
			w.WriteHeader(http.StatusPartialContent)
			w.Write([]byte("k"))
		case "/nohead-norange/kb.msu":
			if r.Method == http.MethodHead {
				w.WriteHeader(http.StatusNotImplemented)
				return
			}
			w.Write([]byte(strings.Repeat("x", 1<<20)))
		case "/broken.msu":
			w.WriteHeader(http.StatusInternalServerError)
		case "/signed.msu":
			// A URL signed for GET alone (an S3 presigned URL): HEAD is refused.
			if r.Method == http.MethodHead {
				w.WriteHeader(http.StatusForbidden)
				return
			}
			w.Header().Set("Content-Range", "bytes 0-0/3")
			w.WriteHeader(http.StatusPartialContent)
			w.Write([]byte("k"))
		case "/stall.msu":
			<-stall
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stall) })
	return srv, seen
}

// requestLog is what a test server was asked, in order.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) add(r string) { l.mu.Lock(); l.reqs = append(l.reqs, r); l.mu.Unlock() }

func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.reqs
	l.reqs = nil
	return r
}

func TestCheckURL(t *testing.T) {
	srv, seen := packageServer(t)
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	for _, tc := range []struct {
		path, want string
		requests   []string
	}{
		{"/kb.msu", "", []string{"HEAD /kb.msu "}},
		{"/missing.msu", "HTTP 404 Not Found", []string{"HEAD /missing.msu ", "GET /missing.msu bytes=0-0"}},
		{"/forbidden.msu", "HTTP 403 Forbidden", []string{"HEAD /forbidden.msu ", "GET /forbidden.msu bytes=0-0"}},
		{"/signed.msu", "", []string{"HEAD /signed.msu ", "GET /signed.msu bytes=0-0"}},
		{"/old/kb.msu", "", []string{"HEAD /old/kb.msu ", "HEAD /kb.msu "}},
		{"/nohead/kb.msu", "", []string{"HEAD /nohead/kb.msu ", "GET /nohead/kb.msu bytes=0-0"}},
		{"/nohead/missing.msu", "HTTP 404 Not Found", []string{"HEAD /nohead/missing.msu ", "GET /nohead/missing.msu bytes=0-0"}},
		{"/nohead-norange/kb.msu", "", []string{"HEAD /nohead-norange/kb.msu ", "GET /nohead-norange/kb.msu bytes=0-0"}},
		{"/broken.msu", "HTTP 500 Internal Server Error", []string{"HEAD /broken.msu ", "GET /broken.msu bytes=0-0"}},
		{"/stall.msu", "no answer within 200ms (context deadline exceeded)", []string{"HEAD /stall.msu "}},
	} {
		seen.take()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		got := checkURL(ctx, srv.Client(), srv.URL+tc.path, 200*time.Millisecond)
		cancel()
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.path, got, tc.want)
		}
		if got := seen.take(); !reflect.DeepEqual(got, tc.requests) {
			t.Errorf("%s: the server saw %q, want %q", tc.path, got, tc.requests)
		}
	}
	got := checkURL(context.Background(), srv.Client(), closedURL+"/kb.msu", time.Second)
	if !strings.HasPrefix(got, "dial tcp") || strings.Contains(got, "Head ") || strings.Contains(got, "127.0.0.1") {
		t.Errorf("a server that is gone: %q, want the dial's error without net/http's prefix nor the address (it would rewrite the verdict)", got)
	}
}

func TestCheckPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "kb.msu")
	os.WriteFile(file, []byte("kb"), 0o600)
	if got := checkPath(os.Stat, file); got != "" {
		t.Errorf("a file: %q, want it found", got)
	}
	if got := checkPath(os.Stat, dir); got != "is a folder, not a file" {
		t.Errorf("a folder: %q", got)
	}
	missing := filepath.Join(dir, "missing.msu")
	if got := checkPath(os.Stat, missing); got == "" || strings.Contains(got, missing) {
		t.Errorf("a missing file: %q, want the error without the path (the source's name has it)", got)
	}
}

func TestSystemDrive(t *testing.T) {
	for env, want := range map[string]string{"": "C:", "C:": "C:", `D:\`: "D:", " E: ": "E:"} {
		if got := systemDrive(func(string) string { return env }); got != want {
			t.Errorf("SystemDrive=%q: %q, want %q", env, got, want)
		}
	}
}

// TestPreflightRun: every source checked at once, each within its
// timeout, reported in install order with the drive's room; the policy
// and proxy read only for Windows Update.
func TestPreflightRun(t *testing.T) {
	srv, _ := packageServer(t)
	share := `\\files\updates\lcu.msu`
	stalledShare := `\\gone\updates\ssu.cab`
	stat := func(p string) (fs.FileInfo, error) {
		switch p {
		case share:
			return os.Stat(os.Args[0])
		case stalledShare:
			select {} // SMB that never answers
		}
		return nil, &fs.PathError{Op: "CreateFile", Path: p, Err: errors.New("The network path was not found.")}
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		switch addr {
		case "wsus.corp:8530":
			return (&net.Dialer{}).DialContext(ctx, network, listener.Addr().String())
		case "wsus-down.corp:8530":
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connectex: No connection could be made because the target machine actively refused it.")}
		}
		<-ctx.Done() // a firewall that drops the packets
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: ctx.Err()}
	}
	var policyReads int32
	checks := func(policy wuPolicy, free int64, freeErr error) preflightChecks {
		return preflightChecks{
			policy: func() (wuPolicy, error) { atomic.AddInt32(&policyReads, 1); return policy, nil },
			proxy:  func() (WinHTTPProxyConfig, error) { return WinHTTPProxyConfig{}, nil },
			client: srv.Client(), dial: dial, stat: stat,
			getenv:    func(k string) string { return map[string]string{"SystemDrive": "C:"}[k] },
			freeBytes: func(d string) (int64, error) { return free, freeErr },
			timeout:   300 * time.Millisecond,
		}
	}
	pkgs := host.UpdateRequest{Source: config.SourcePackages, Target: target, Packages: []config.Package{
		{URL: srv.URL + "/kb.msu"}, {Path: stalledShare}, {URL: srv.URL + "/missing.msu"}, {Path: share}, {Path: `C:\updates\none.msu`}, {URL: srv.URL + "/stall.msu"},
	}}
	for _, tc := range []struct {
		name    string
		req     host.UpdateRequest
		policy  wuPolicy
		free    int64
		freeErr error
		want    host.PreflightFindings
		reads   int32
	}{
		{"packages", pkgs, wuPolicy{}, 42 << 30, nil, host.PreflightFindings{SystemDrive: "C:", FreeBytes: 42 << 30, Sources: []host.SourceCheck{
			{Name: srv.URL + "/kb.msu"},
			{Name: stalledShare, Err: "no answer within 300ms"},
			{Name: srv.URL + "/missing.msu", Err: "HTTP 404 Not Found"},
			{Name: share},
			{Name: `C:\updates\none.msu`, Err: "The network path was not found."},
			{Name: srv.URL + "/stall.msu", Err: "no answer within 300ms (context deadline exceeded)"},
		}}, 0},
		{"WSUS answers", windowsUpdateRequest(), wuPolicy{WUServer: "http://wsus.corp:8530", UseWUServer: 1}, 8 << 30, nil,
			host.PreflightFindings{SystemDrive: "C:", FreeBytes: 8 << 30, Sources: []host.SourceCheck{{Name: "WSUS http://wsus.corp:8530"}}}, 1},
		{"WSUS refuses", windowsUpdateRequest(), wuPolicy{WUServer: "http://wsus-down.corp:8530", UseWUServer: 1}, 0, errors.New("The device is not ready."),
			host.PreflightFindings{SystemDrive: "C:", FreeBytes: -1, Sources: []host.SourceCheck{{Name: "WSUS http://wsus-down.corp:8530",
				Err: "dial tcp: connectex: No connection could be made because the target machine actively refused it."}}}, 1},
		{"Windows Update dropped by a firewall", windowsUpdateRequest(), wuPolicy{}, 20 << 30, nil, host.PreflightFindings{SystemDrive: "C:", FreeBytes: 20 << 30, Sources: []host.SourceCheck{
			{Name: "Windows Update (slscr.update.microsoft.com)", Err: "no answer within 300ms (dial tcp: context deadline exceeded)"},
			{Name: "Windows Update (fe3cr.delivery.mp.microsoft.com)", Err: "no answer within 300ms (dial tcp: context deadline exceeded)"},
			{Name: "Windows Update payloads (download.windowsupdate.com)", Err: "neither way answers (port 80: no answer within 300ms (dial tcp: context deadline exceeded); port 443: no answer within 300ms (dial tcp: context deadline exceeded))"},
		}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atomic.StoreInt32(&policyReads, 0)
			start := time.Now()
			got := checks(tc.policy, tc.free, tc.freeErr).run(context.Background(), tc.req)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("took %s: the checks should run at once, each within 300ms", took)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("findings\n%+v\nwant\n%+v", got, tc.want)
			}
			if n := atomic.LoadInt32(&policyReads); n != tc.reads {
				t.Errorf("the policy was read %d times, want %d", n, tc.reads)
			}
		})
	}
}

// A proxy asked for a tunnel (HTTP CONNECT): one that opens it passes, one
// that wants credentials says so (the Windows Update client, as SYSTEM, gives
// none), one that refuses the host names it, one that never answers is
// timed out.
func TestCheckTunnel(t *testing.T) {
	answers := map[string]string{
		"open.example:443":    "HTTP/1.1 200 Connection established\r\n\r\n",
		"auth.example:443":    "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: NTLM\r\nContent-Length: 0\r\n\r\n",
		"blocked.example:443": "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n",
	}
	proxy := fakeProxy(t, func(req *http.Request) string {
		if req.Method != http.MethodConnect {
			return ""
		}
		return answers[req.Host] // none: a proxy that never answers
	})
	dial := (&net.Dialer{}).DialContext
	for _, tc := range []struct{ addr, want string }{
		{"open.example:443", ""},
		{"auth.example:443", "the proxy asks for authentication (HTTP 407), which the Windows Update client (SYSTEM) never gives"},
		{"blocked.example:443", "the proxy refused a tunnel to blocked.example:443 (HTTP 403 Forbidden)"},
		{"silent.example:443", "the proxy did not answer CONNECT silent.example:443 within 200ms"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		got := checkTunnel(ctx, dial, proxy, tc.addr, 200*time.Millisecond)
		cancel()
		if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.addr, got, tc.want)
		}
	}
	if got := checkTunnel(context.Background(), dial, "127.0.0.1:1", "open.example:443", time.Second); !strings.HasPrefix(got, "the proxy: dial tcp") {
		t.Errorf("a proxy that refuses connections: %q", got)
	}
}

// Windows Update's payloads may flow over 80 or 443, directly or through the
// proxy (a tunnel, or a plain HTTP request): any way passes; a 407 blocks,
// and so does every way failing, each said.
func TestCheckPayload(t *testing.T) {
	refused := func(addr string) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused " + addr)}
	}
	// The proxy: answers CONNECT with connectStatus and a plain request with plainStatus.
	var connectStatus, plainStatus atomic.Int32
	proxy := fakeProxy(t, func(req *http.Request) string {
		status := plainStatus.Load()
		if req.Method == http.MethodConnect {
			status = connectStatus.Load()
		}
		return fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", status, http.StatusText(int(status)))
	})
	open := map[string]bool{}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == proxy {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
		if open[addr] {
			a, b := net.Pipe()
			b.Close()
			return a, nil
		}
		return nil, refused(addr)
	}
	check := func(via string) string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return checkPayload(ctx, dial, via, "dl.example", time.Second)
	}
	open["dl.example:443"] = true
	if got := check(""); got != "" {
		t.Errorf("443 open, 80 refused: %q", got)
	}
	open = map[string]bool{"dl.example:80": true}
	if got := check(""); got != "" {
		t.Errorf("80 open, 443 refused: %q", got)
	}
	open = map[string]bool{}
	if got := check(""); !strings.Contains(got, "port 80: dial tcp") || !strings.Contains(got, "port 443: dial tcp") {
		t.Errorf("both refused: %q", got)
	}
	for _, tc := range []struct {
		connect, plain int32
		want           string
	}{
		{200, 403, ""},
		{403, 200, ""},
		{403, 403, ""}, // a 403 to a plain request may be the host's: passes
		{407, 200, "HTTP 407"},
		{403, 407, "HTTP 407"},
	} {
		connectStatus.Store(tc.connect)
		plainStatus.Store(tc.plain)
		if got := check(proxy); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("CONNECT %d, plain %d: %q, want %q", tc.connect, tc.plain, got, tc.want)
		}
	}
}

// fakeProxy listens on loopback and answers each request with what answer
// says ("": nothing, for a second); its address.
func fakeProxy(t *testing.T, answer func(*http.Request) string) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listener.Close() })
	go func() {
		for {
			c, err := listener.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				if a := answer(req); a != "" {
					io.WriteString(c, a)
					return
				}
				time.Sleep(time.Second)
			}()
		}
	}()
	return listener.Addr().String()
}
