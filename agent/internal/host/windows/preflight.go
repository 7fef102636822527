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
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
)

// Preflight (Host.Preflight) checks, without changing anything, that every
// place an update would come from answers the host, that Windows Update
// offers what the install would take (offer.go), and how much room the
// system drive has. Which places those are (the packages in install order,
// the WSUS server the node's policy names, or Windows Update), how each is
// reached, and what an answer means are decided here and tested on Linux;
// preflight_windows.go only reads the registry, the WinHTTP proxy and the
// disk. The verdict is decide.Preflight's.

const (
	// preflightCheckTimeout bounds each check: a firewall that drops
	// packets makes a dial wait for its own timeout (21 s on Windows).
	preflightCheckTimeout = 10 * time.Second
	// preflightTimeout bounds the whole preflight; the checks run at once.
	preflightTimeout = 30 * time.Second
)

const (
	// wuPolicyKey is where Group Policy (or an image) names a WSUS server:
	// its WUServer value is used only when the AU subkey's UseWUServer is 1.
	wuPolicyKey   = `SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate`
	wuPolicyAUKey = wuPolicyKey + `\AU`
	// wuServiceKey is the Windows Update service's, whose Start 4 is
	// Disabled (as GitHub's runner images set it).
	wuServiceKey = `SYSTEM\CurrentControlSet\Services\wuauserv`
)

// windowsUpdateHosts are what a Windows Update client reaches before
// anything else: the service locator (under *.update.microsoft.com) and
// the client web service it searches (under *.delivery.mp.microsoft.com),
// both on 443. Microsoft's endpoint lists for Windows ("Manage connection
// endpoints", Windows Update) name those two domains as what connects a
// device to Windows Update; the two host names are the ones clients are
// seen to use there. The payloads then come from
// *.dl.delivery.mp.microsoft.com and *.windowsupdate.com:
// windowsUpdatePayloadHost stands for them, since an allow-list that lets
// the service through and not the content passes a check of the service
// alone and fails the download after the drain.
var windowsUpdateHosts = []string{"slscr.update.microsoft.com", "fe3cr.delivery.mp.microsoft.com"}

// windowsUpdatePayloadHost is where Windows Update's content comes from:
// over plain HTTP (80) mostly, over HTTPS (443) too, so either passes.
const windowsUpdatePayloadHost = "download.windowsupdate.com"

// wuPolicy is the node's Windows Update policy as read from the registry.
type wuPolicy struct {
	// WUServer is the value WUServer under wuPolicyKey ("" when absent).
	WUServer string
	// UseWUServer is the DWORD UseWUServer under wuPolicyAUKey (0 absent).
	UseWUServer uint64
	// AU: NoAutoUpdate and AUOptions under wuPolicyAUKey.
	AU host.AutomaticUpdates
	// ServiceStart is wuauserv's Start (0 absent; 4 Disabled).
	ServiceStart uint64
}

// wsus is the WSUS server the policy makes the node use: WUServer, when
// and only when UseWUServer is 1 (a WUServer left behind with UseWUServer
// 0 is not used; the node goes to Windows Update). server is "" when the
// policy says to use a WSUS server and names none.
func (p wuPolicy) wsus() (server string, use bool) {
	if p.UseWUServer != 1 {
		return "", false
	}
	return strings.TrimSpace(p.WUServer), true
}

// WinHTTPProxyConfig is the machine's WinHTTP proxy (`netsh winhttp show proxy`),
// which the Windows Update client uses as SYSTEM; Proxy "" is direct access.
type WinHTTPProxyConfig struct {
	// Proxy is the proxy list: "proxy:8080", or per scheme
	// "http=proxy:8080;https=proxy:8443".
	Proxy string
	// Bypass is the bypass list: "<local>;*.corp.example;10.*".
	Bypass string
}

// proxyFor is the proxy (host:port) WinHTTP sends a request of scheme
// ("http" or "https") to host through; "" is direct. A scheme-specific
// entry wins over a plain one; an entry's port defaults to 80 (443 for an
// entry written https://…).
func (p WinHTTPProxyConfig) proxyFor(scheme, host string) string {
	if strings.TrimSpace(p.Proxy) == "" || bypassed(p.Bypass, host) {
		return ""
	}
	var plain string
	for _, e := range listEntries(p.Proxy) {
		scope, addr, scoped := strings.Cut(e, "=")
		if !scoped {
			addr = e
		}
		addr = proxyAddr(addr)
		switch {
		case addr == "":
		case scoped && strings.EqualFold(scope, scheme):
			return addr
		case !scoped && plain == "":
			plain = addr
		}
	}
	return plain
}

// proxyAddr is a proxy list entry as host:port.
func proxyAddr(e string) string {
	port := "80"
	if s, rest, ok := strings.Cut(e, "://"); ok {
		if strings.EqualFold(s, "https") {
			port = "443"
		}
		e = rest
	}
	e = strings.TrimSuffix(e, "/")
	if e == "" {
		return ""
	}
	if h, p, err := net.SplitHostPort(e); err == nil {
		return net.JoinHostPort(h, p)
	}
	return net.JoinHostPort(strings.Trim(e, "[]"), port)
}

// bypassed: host is on WinHTTP's bypass list, whose entries are host names
// or patterns with * ("*.corp.example", "10.*"), or <local> (any name
// without a dot).
func bypassed(list, host string) bool {
	host = strings.ToLower(host)
	for _, e := range listEntries(list) {
		e = strings.ToLower(e)
		if _, rest, ok := strings.Cut(e, "://"); ok {
			e = rest
		}
		switch {
		case e == "<local>":
			if !strings.Contains(host, ".") {
				return true
			}
		case e == host:
			return true
		case strings.Contains(e, "*"):
			if ok, _ := path.Match(e, host); ok {
				return true
			}
			// "*.corp.example" also matches "a.b.corp.example".
			if strings.HasPrefix(e, "*.") && strings.HasSuffix(host, e[1:]) {
				return true
			}
		}
	}
	return false
}

func listEntries(list string) []string {
	return strings.FieldsFunc(list, func(r rune) bool { return r == ';' || r == ' ' || r == '\t' || r == ',' })
}

// serverAddr is where a dial to a server URL goes: host:port, the port
// from the URL or else from its scheme (http 80, https 443). WUServer
// values are URLs ("http://wsus.corp:8530"); one written without a scheme
// is taken as http, as the Windows Update client takes it.
func serverAddr(raw string) (addr, scheme string, err error) {
	s := strings.TrimSpace(raw)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Hostname() == "" {
		return "", "", fmt.Errorf("%q is not a server URL such as http://wsus.corp:8530", raw)
	}
	scheme = strings.ToLower(u.Scheme)
	port := u.Port()
	switch {
	case port != "":
	case scheme == "http":
		port = "80"
	case scheme == "https":
		port = "443"
	default:
		return "", "", fmt.Errorf("%q is neither an http:// nor an https:// URL", raw)
	}
	return net.JoinHostPort(u.Hostname(), port), scheme, nil
}

// probeKind is how a source is checked.
type probeKind int

const (
	// probeURL: an HTTP HEAD (then a one-byte GET) of an https URL.
	probeURL probeKind = iota
	// probePath: the file exists (a drive or UNC path).
	probePath
	// probeDial: a TCP connection to host:port opens.
	probeDial
	// probeTunnel: the proxy Via opens a tunnel to host:port (HTTP CONNECT),
	// as WinHTTP asks it for an https source: proves what the proxy lets
	// through, not only that it answers.
	probeTunnel
	// probePayload: a host Windows Update downloads from answers on 80 or
	// 443, directly, or through the proxy Via (a tunnel to 443, or a plain
	// HTTP request for port 80).
	probePayload
)

// sourceProbe is one update source and how to check it.
type sourceProbe struct {
	// Name is how a person looks the source up (host.SourceCheck.Name).
	Name string
	Kind probeKind
	// Target is the URL, the path, or the host:port to dial.
	Target string
	// Via is the proxy (host:port) a probeTunnel asks.
	Via string
	// Err, when set, is why the source cannot be reached without trying
	// (a policy that names no server); nothing is probed.
	Err string
}

// sourceProbes are the sources of req, in install order: each package, or
// the WSUS server the node's policy makes it use, or Windows Update. The
// Windows Update client goes through the machine's WinHTTP proxy, so a
// dial to WSUS or Windows Update goes to that proxy when one is set for it
// (it proves the proxy answers, not what it lets through). policyErr and
// proxyErr are failed reads of the policy and the proxy.
func sourceProbes(req host.UpdateRequest, policy wuPolicy, policyErr error, proxy WinHTTPProxyConfig, proxyErr error) []sourceProbe {
	switch req.Source {
	case config.SourcePackages:
		var probes []sourceProbe
		for _, p := range req.Packages {
			if p.URL != "" {
				probes = append(probes, sourceProbe{Name: p.URL, Kind: probeURL, Target: p.URL})
			} else {
				probes = append(probes, sourceProbe{Name: p.Path, Kind: probePath, Target: p.Path})
			}
		}
		return probes
	case config.SourceWindowsUpdate, "":
	default:
		return []sourceProbe{{Name: fmt.Sprintf("update source %q", req.Source), Err: "not a source the agent knows"}}
	}
	if policyErr != nil {
		return []sourceProbe{{Name: "Windows Update or WSUS", Err: fmt.Sprintf(`reading the node's Windows Update policy (HKLM\%s): %v`, wuPolicyKey, policyErr)}}
	}
	through := func(name, scheme, addr string) sourceProbe {
		h, _, _ := net.SplitHostPort(addr)
		switch p := proxy.proxyFor(scheme, h); {
		case proxyErr != nil:
			name += fmt.Sprintf(" (WinHTTP proxy unreadable: %v; dialled directly)", proxyErr)
		case p != "" && scheme == "https":
			return sourceProbe{Name: name + " via WinHTTP proxy " + p, Kind: probeTunnel, Target: addr, Via: p}
		case p != "":
			// Plain HTTP goes to the proxy as a request of its own, not a tunnel.
			return sourceProbe{Name: name + " via WinHTTP proxy " + p, Kind: probeDial, Target: p}
		}
		return sourceProbe{Name: name, Kind: probeDial, Target: addr}
	}
	if server, use := policy.wsus(); use {
		if server == "" {
			return []sourceProbe{{Name: "WSUS", Err: fmt.Sprintf(`the node's policy sets UseWUServer to 1 (HKLM\%s) but names no WUServer (HKLM\%s)`, wuPolicyAUKey, wuPolicyKey)}}
		}
		addr, scheme, err := serverAddr(server)
		if err != nil {
			return []sourceProbe{{Name: "WSUS " + server, Err: fmt.Sprintf(`WUServer (HKLM\%s) %v`, wuPolicyKey, err)}}
		}
		return []sourceProbe{through("WSUS "+server, scheme, addr)}
	}
	var probes []sourceProbe
	for _, h := range windowsUpdateHosts {
		probes = append(probes, through("Windows Update ("+h+")", "https", net.JoinHostPort(h, "443")))
	}
	payloads := through("Windows Update payloads ("+windowsUpdatePayloadHost+")", "http", net.JoinHostPort(windowsUpdatePayloadHost, "80"))
	if payloads.Err == "" {
		payloads.Kind, payloads.Target = probePayload, windowsUpdatePayloadHost
		if payloads.Via == "" && strings.Contains(payloads.Name, " via WinHTTP proxy ") {
			payloads.Via = proxy.proxyFor("http", windowsUpdatePayloadHost)
		}
	}
	return append(probes, payloads)
}

// headRefused: any answer to HEAD but a 2xx is asked again with a one-byte
// GET, which is what the download sends: servers that do not do HEAD (405,
// 501), and URLs signed for GET alone (S3 presigned URLs, some CDNs answer
// HEAD with 403) would otherwise block a package that downloads fine.
func headRefused(status int) bool {
	return status < 200 || status >= 300
}

// answered: the server serves the URL. Any 2xx (206 Partial Content to the
// one-byte GET); 416 Range Not Satisfiable to that GET is a file that is
// there but empty (its digest will say it is the wrong one). A 3xx left
// after following redirects (none to follow, too many, 304), a 401/403
// (the download sends no credentials), a 404/410 or a 5xx: the download
// would fail the same way.
func answered(status int, rangedGet bool) bool {
	return status >= 200 && status < 300 || rangedGet && status == http.StatusRequestedRangeNotSatisfiable
}

// checkURL asks for an https URL as the download will (same client: the
// proxy from HTTPS_PROXY/NO_PROXY, redirects followed), without fetching
// it: "" when the server serves it, else what went wrong ("HTTP 404 Not
// Found", "dial tcp …: i/o timeout").
func checkURL(ctx context.Context, client *http.Client, rawURL string, timeout time.Duration) string {
	status, text, err := ask(ctx, client, http.MethodHead, rawURL)
	ranged := false
	if err == nil && headRefused(status) {
		ranged = true
		status, text, err = ask(ctx, client, http.MethodGet, rawURL)
	}
	switch {
	case err != nil:
		return describeErr(err, timeout)
	case answered(status, ranged):
		return ""
	}
	return "HTTP " + text
}

// ask sends one request; text is the status line ("404 Not Found").
func ask(ctx context.Context, client *http.Client, method, rawURL string) (status int, text string, err error) {
	req, err := http.NewRequestWithContext(ctx, method, rawURL, nil)
	if err != nil {
		return 0, "", err
	}
	if method == http.MethodGet {
		req.Header.Set("Range", "bytes=0-0")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	// A server that ignores Range sends the whole file: closing the body
	// unread drops the connection instead of reading it.
	resp.Body.Close()
	text = resp.Status
	if text == "" {
		text = fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return resp.StatusCode, text, nil
}

// checkPath: the package is a file at its path (a local drive or a share
// the account running the check can read). stat is os.Stat.
func checkPath(stat func(string) (fs.FileInfo, error), p string) string {
	fi, err := stat(p)
	switch {
	case err != nil:
		return describeErr(err, 0)
	case fi.IsDir():
		return "is a folder, not a file"
	case !fi.Mode().IsRegular():
		return "is not a plain file"
	}
	return ""
}

// checkDial opens a TCP connection to addr and closes it.
func checkDial(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string, timeout time.Duration) string {
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return describeErr(err, timeout)
	}
	c.Close()
	return ""
}

// proxyAuthRequired is what a 407 means for the Windows Update client. Said
// once per source: short, the hosts to exempt are in docs/agent.md.
const proxyAuthRequired = "the proxy asks for authentication (HTTP 407), which the Windows Update client (SYSTEM) never gives: exempt the Windows Update hosts from it"

// checkTunnel asks the proxy at via for a tunnel to addr (HTTP CONNECT) and
// closes it: 2xx is a tunnel; 407 a proxy that wants credentials the Windows
// Update client, running as SYSTEM, does not give; anything else the proxy
// refusing that host.
func checkTunnel(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), via, addr string, timeout time.Duration) string {
	request := fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
	status, failed := askProxy(ctx, dial, via, http.MethodConnect, request, "CONNECT "+addr, timeout)
	switch {
	case failed != "":
		return failed
	case status >= 200 && status < 300:
		return ""
	case status == http.StatusProxyAuthRequired:
		return proxyAuthRequired
	}
	return fmt.Sprintf("the proxy refused a tunnel to %s (HTTP %d %s): allow it for the nodes", addr, status, http.StatusText(status))
}

// askProxy sends request (what, in messages) to the proxy at via and reads
// the status of its answer; failed says why there is none.
func askProxy(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), via, method, request, what string, timeout time.Duration) (status int, failed string) {
	c, err := dial(ctx, "tcp", via)
	if err != nil {
		return 0, "the proxy: " + describeErr(err, timeout)
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if _, err := io.WriteString(c, request); err != nil {
		return 0, "the proxy: " + describeErr(err, timeout)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		var ne net.Error
		if ctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
			return 0, fmt.Sprintf("the proxy did not answer %s within %s", what, timeout)
		}
		return 0, fmt.Sprintf("the proxy's answer to %s: %v", what, err)
	}
	resp.Body.Close()
	return resp.StatusCode, ""
}

// checkPayload checks that Windows Update's downloads from host can flow:
// directly, host answers on 80 or 443; through the proxy via, it opens a
// tunnel to host:443 or answers a plain HTTP request for host (any status
// but 407: whether the proxy or the host answered cannot be told apart). Both
// ways are tried at once; a 407 or both failing blocks, saying each.
func checkPayload(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), via, host string, timeout time.Duration) string {
	tries := []func() string{
		func() string { return checkDial(ctx, dial, net.JoinHostPort(host, "80"), timeout) },
		func() string { return checkDial(ctx, dial, net.JoinHostPort(host, "443"), timeout) },
	}
	what := []string{"port 80", "port 443"}
	if via != "" {
		tries = []func() string{
			func() string { return checkTunnel(ctx, dial, via, net.JoinHostPort(host, "443"), timeout) },
			func() string { return checkThrough(ctx, dial, via, host, timeout) },
		}
		what = []string{"a tunnel to port 443", "plain HTTP"}
	}
	results := make([]chan string, len(tries))
	for i, try := range tries {
		results[i] = make(chan string, 1)
		go func() { results[i] <- try() }()
	}
	var failed []string
	for i, r := range results {
		msg := <-r
		if msg == "" {
			return ""
		}
		if strings.Contains(msg, "HTTP 407") {
			return msg
		}
		failed = append(failed, what[i]+": "+msg)
	}
	return "neither way answers (" + strings.Join(failed, "; ") + ")"
}

// checkThrough sends a plain HTTP request for host to the proxy at via, as
// WinHTTP sends an http:// download through it: 407 is a proxy that wants
// credentials; any other answer reached something.
func checkThrough(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), via, host string, timeout time.Duration) string {
	request := fmt.Sprintf("HEAD http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", host, host)
	status, failed := askProxy(ctx, dial, via, http.MethodHead, request, "a request for http://"+host+"/", timeout)
	switch {
	case failed != "":
		return failed
	case status == http.StatusProxyAuthRequired:
		return proxyAuthRequired
	}
	return ""
}

// describeErr is an error without what the source's name already says
// (net/http's `Head "<url>": `, os.Stat's `CreateFile <path>: `); a check
// that ran out of time while it waited for an answer says so ("dial tcp
// …: i/o timeout" already does).
func describeErr(err error, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	// Without the addresses a dial names (a CDN rotates them): the same
	// failure reads the same at every look, so the verdict is not rewritten.
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		err = fmt.Errorf("%s %s: %w", oe.Op, oe.Net, oe.Err)
	}
	text := err.Error()
	if errors.Is(err, context.DeadlineExceeded) && !strings.Contains(text, "timeout") {
		return fmt.Sprintf("no answer within %s (%s)", timeout, text)
	}
	return text
}

// preflightChecks are the reads and probes of a preflight: the Windows
// ones in preflight_windows.go, stand-ins in the tests.
type preflightChecks struct {
	// policy reads the node's Windows Update policy (wuPolicyKey).
	policy func() (wuPolicy, error)
	// proxy reads the machine's WinHTTP proxy.
	proxy func() (WinHTTPProxyConfig, error)
	// client fetches https URLs (preflightClient).
	client *http.Client
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	stat   func(string) (fs.FileInfo, error)
	getenv func(string) string
	// freeBytes on a drive ("C:") available to the caller.
	freeBytes func(drive string) (int64, error)
	// timeout of each check (0: preflightCheckTimeout), all within
	// preflightTimeout.
	timeout time.Duration
}

// Preflight checks, without changing anything, that the sources of req
// answer this host and how much room its system drive has: each check
// within preflightCheckTimeout, all at once, the whole within
// preflightTimeout.
func (h *Host) Preflight(ctx context.Context, req host.UpdateRequest) host.PreflightFindings {
	f := preflightChecks{
		policy:    func() (wuPolicy, error) { return readWUPolicy(h.m.System) },
		proxy:     h.m.Net.WinHTTPProxy,
		client:    h.m.Net.HTTP(),
		dial:      h.m.Net.Dial,
		stat:      h.m.Box.Stat,
		getenv:    h.m.Box.Getenv,
		freeBytes: h.m.Box.FreeBytes,
	}.run(ctx, req)
	if req.Source == config.SourcePackages {
		return f
	}
	for _, s := range f.Sources {
		if s.Err != "" {
			return f // the search would fail the same way
		}
	}
	offer := h.offers.offer(h.m, req, h.m.Box.Now())
	f.Offer = &offer
	return f
}

// preflightClient is the download's client: net/http's transport, with
// the proxy from HTTPS_PROXY/NO_PROXY as the servicing task has it.
func preflightClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = http.ProxyFromEnvironment
	return &http.Client{Transport: t}
}

// run checks every source of req at once, each within its timeout, and
// reads the system drive's free space.
func (c preflightChecks) run(ctx context.Context, req host.UpdateRequest) host.PreflightFindings {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	timeout := c.timeout
	if timeout <= 0 {
		timeout = preflightCheckTimeout
	}
	var policy wuPolicy
	var proxy WinHTTPProxyConfig
	var policyErr, proxyErr error
	if req.Source != config.SourcePackages {
		policy, policyErr = c.policy()
		proxy, proxyErr = c.proxy()
	}
	probes := sourceProbes(req, policy, policyErr, proxy, proxyErr)
	f := host.PreflightFindings{Sources: make([]host.SourceCheck, len(probes)), SystemDrive: systemDrive(c.getenv),
		AutomaticUpdates: policy.AU, WUServiceDisabled: policy.ServiceStart == 4}
	var wg sync.WaitGroup
	for i, p := range probes {
		f.Sources[i].Name = p.Name
		if p.Err != "" {
			f.Sources[i].Err = p.Err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			f.Sources[i].Err = c.probe(ctx, p, timeout)
		}()
	}
	if n, err := c.freeBytes(f.SystemDrive); err == nil {
		f.FreeBytes = n
	} else {
		f.FreeBytes = -1
	}
	wg.Wait()
	return f
}

// probe checks one source. A path is stat'ed on a goroutine of its own:
// a share that does not answer holds os.Stat for as long as SMB waits,
// and the check stops waiting at its timeout.
func (c preflightChecks) probe(ctx context.Context, p sourceProbe, timeout time.Duration) string {
	switch p.Kind {
	case probeURL:
		return checkURL(ctx, c.client, p.Target, timeout)
	case probeDial:
		return checkDial(ctx, c.dial, p.Target, timeout)
	case probeTunnel:
		return checkTunnel(ctx, c.dial, p.Via, p.Target, timeout)
	case probePayload:
		return checkPayload(ctx, c.dial, p.Via, p.Target, timeout)
	}
	done := make(chan string, 1)
	go func() { done <- checkPath(c.stat, p.Target) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Sprintf("no answer within %s", timeout)
	}
}

// systemDrive is %SystemDrive% ("C:"), where servicing stages and
// installs; C: when unset.
func systemDrive(getenv func(string) string) string {
	d := strings.TrimRight(strings.TrimSpace(getenv("SystemDrive")), `\/`)
	if d == "" {
		return "C:"
	}
	return d
}

// readWUPolicy reads WUServer, and UseWUServer, NoAutoUpdate and
// AUOptions under AU; an absent key or value is the zero value (no WSUS,
// Automatic Updates not configured by policy).
func readWUPolicy(sys System) (wuPolicy, error) {
	var p wuPolicy
	var err error
	p.WUServer, _, err = sys.RegistryString(wuPolicyKey, "WUServer")
	if err != nil && !errors.Is(err, ErrNotExist) {
		return wuPolicy{}, fmt.Errorf(`reading HKLM\%s\WUServer: %w`, wuPolicyKey, err)
	}
	err = nil
	dword := func(name string) uint64 {
		v, e := sys.RegistryInteger(wuPolicyAUKey, name)
		if e != nil && !errors.Is(e, ErrNotExist) && err == nil {
			err = fmt.Errorf(`reading HKLM\%s\%s: %w`, wuPolicyAUKey, name, e)
		}
		return v
	}
	p.UseWUServer, p.AU.AUOptions = dword("UseWUServer"), dword("AUOptions")
	p.AU.NoAutoUpdate = dword("NoAutoUpdate") == 1
	if start, e := sys.RegistryInteger(wuServiceKey, "Start"); e == nil {
		p.ServiceStart = start
	} else if !errors.Is(e, ErrNotExist) && err == nil {
		err = fmt.Errorf(`reading HKLM\%s\Start: %w`, wuServiceKey, e)
	}
	if err != nil {
		return wuPolicy{}, err
	}
	return p, nil
}
