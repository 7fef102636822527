package stage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

func server(t *testing.T, files map[string][]byte) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestFetchFromURL(t *testing.T) {
	pkg := []byte("the cumulative update")
	srv, hits := server(t, map[string][]byte{"/kb.msu": pkg})
	dest := filepath.Join(t.TempDir(), "r1", "01", "kb.msu")
	ctx := context.Background()

	if err := Fetch(ctx, srv.Client(), Source{URL: srv.URL + "/kb.msu"}, dest, sum(pkg), MaxPackage); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dest); !bytes.Equal(b, pkg) {
		t.Fatalf("staged %q, want the package", b)
	}
	// Staged once: a restart re-verifies the file and downloads nothing.
	if err := Fetch(ctx, srv.Client(), Source{URL: srv.URL + "/kb.msu"}, dest, sum(pkg), MaxPackage); err != nil || hits.Load() != 1 {
		t.Errorf("second fetch: %v after %d downloads, want no second download", err, hits.Load())
	}
	// A staged file that changed since is replaced, not installed.
	os.WriteFile(dest, []byte("truncat"), 0o600)
	if err := Fetch(ctx, srv.Client(), Source{URL: srv.URL + "/kb.msu"}, dest, sum(pkg), MaxPackage); err != nil || hits.Load() != 2 {
		t.Errorf("corrupted staged file: %v after %d downloads, want it downloaded again", err, hits.Load())
	}
	if b, _ := os.ReadFile(dest); !bytes.Equal(b, pkg) {
		t.Errorf("after re-staging: %q, want the package", b)
	}
}

func TestFetchRefusesAWrongDigest(t *testing.T) {
	srv, _ := server(t, map[string][]byte{"/kb.msu": []byte("something else")})
	dir := t.TempDir()
	dest := filepath.Join(dir, "kb.msu")
	want := sum([]byte("the cumulative update"))
	err := Fetch(context.Background(), srv.Client(), Source{URL: srv.URL + "/kb.msu"}, dest, want, MaxPackage)
	var mm *MismatchError
	if !errors.As(err, &mm) || mm.Want != want || mm.Got != sum([]byte("something else")) || !strings.Contains(err.Error(), "/kb.msu") {
		t.Fatalf("err = %v, want a mismatch naming the package, expected and actual digest", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a file that failed its digest was left behind: %v", entries)
	}
}

func TestFetchFromHostPath(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "ssu.cab")
	os.WriteFile(src, []byte("ssu"), 0o600)
	dest := filepath.Join(dir, "staged", "ssu.cab")
	if err := Fetch(context.Background(), nil, Source{Path: src}, dest, sum([]byte("ssu")), MaxPackage); err != nil {
		t.Fatal(err)
	}
	err := Fetch(context.Background(), nil, Source{Path: src}, filepath.Join(dir, "staged", "x.cab"), sum([]byte("other")), MaxPackage)
	var mm *MismatchError
	if !errors.As(err, &mm) {
		t.Errorf("wrong digest of a host file: %v, want a mismatch", err)
	}
}

func TestFetchHTTPError(t *testing.T) {
	srv, _ := server(t, nil)
	err := Fetch(context.Background(), srv.Client(), Source{URL: srv.URL + "/missing.msu"}, filepath.Join(t.TempDir(), "m.msu"), sum(nil), MaxPackage)
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("err = %v, want the HTTP status", err)
	}
}

// A download past its cap is stopped, whether the server announces its
// length or streams without one; nothing is left at dest.
func TestFetchStopsAtTheCap(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 4096)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/streamed.msu" {
			w.Header().Set("Transfer-Encoding", "chunked")
			w.(http.Flusher).Flush()
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/announced.msu", "/streamed.msu"} {
		dest := filepath.Join(t.TempDir(), "kb.msu")
		err := Fetch(context.Background(), srv.Client(), Source{URL: srv.URL + path}, dest, sum(body), 1000)
		if err == nil || !strings.Contains(err.Error(), "1000") && !errors.Is(err, errTooLarge) {
			t.Errorf("%s: %v, want the download stopped at its cap", path, err)
		}
		if _, serr := os.Stat(dest); serr == nil {
			t.Errorf("%s: a file was left at dest", path)
		}
		if err := Fetch(context.Background(), srv.Client(), Source{URL: srv.URL + path}, dest, sum(body), 4096); err != nil {
			t.Errorf("%s at its cap exactly: %v", path, err)
		}
	}
	// A file on a share is capped too.
	src := filepath.Join(t.TempDir(), "big.cab")
	os.WriteFile(src, body, 0o600)
	if err := Fetch(context.Background(), nil, Source{Path: src}, filepath.Join(t.TempDir(), "b.cab"), sum(body), 100); !errors.Is(err, errTooLarge) {
		t.Errorf("a path past the cap: %v, want errTooLarge", err)
	}
}

// A redirect from https to http is refused (https to https is followed).
func TestDownloadsStayOnHTTPS(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("pkg")) }))
	t.Cleanup(plain.Close)
	var tlsURL string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-http":
			http.Redirect(w, r, plain.URL+"/kb.msu", http.StatusFound)
		case "/to-https":
			http.Redirect(w, r, tlsURL+"/kb.msu", http.StatusFound)
		default:
			w.Write([]byte("pkg"))
		}
	}))
	t.Cleanup(srv.Close)
	tlsURL = srv.URL
	err := Fetch(context.Background(), srv.Client(), Source{URL: srv.URL + "/to-http"}, filepath.Join(t.TempDir(), "a.msu"), sum([]byte("pkg")), MaxPackage)
	if err == nil || !strings.Contains(err.Error(), "downloads stay on https") {
		t.Errorf("redirect to http: %v, want it refused", err)
	}
	if err := Fetch(context.Background(), srv.Client(), Source{URL: srv.URL + "/to-https"}, filepath.Join(t.TempDir(), "b.msu"), sum([]byte("pkg")), MaxPackage); err != nil {
		t.Errorf("redirect to https: %v", err)
	}
}

// An archive the cluster admin allowed by URL prefix is taken from that URL
// alone: a redirect, even to https on the same server, is refused before the
// request follows it.
func TestAnAllowedArchiveIsNotFollowedElsewhere(t *testing.T) {
	var followed atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/containerd/c.tar.gz" {
			http.Redirect(w, r, "/uploads/c.tar.gz", http.StatusFound)
			return
		}
		followed.Add(1)
		w.Write([]byte("pkg"))
	}))
	t.Cleanup(srv.Close)
	dest := filepath.Join(t.TempDir(), "c.tar.gz")
	err := Fetch(context.Background(), srv.Client(), Source{URL: srv.URL + "/containerd/c.tar.gz", NoRedirect: true}, dest, sum([]byte("pkg")), MaxRuntimeArchive)
	if err == nil || followed.Load() != 0 {
		t.Errorf("a redirect off the allowed URL: err %v, %d requests to where it pointed; want it refused unfollowed", err, followed.Load())
	}
	if _, statErr := os.Stat(dest); !errors.Is(statErr, fs.ErrNotExist) {
		t.Errorf("nothing may be staged: %v", statErr)
	}
}

func TestParseSHA256Sum(t *testing.T) {
	d := strings.Repeat("ab", 32)
	content := d + "  containerd-1.7.22-windows-amd64.tar.gz\n"
	if got, err := ParseSHA256Sum(content, "containerd-1.7.22-windows-amd64.tar.gz"); err != nil || got != d {
		t.Errorf("= %q, %v; want %q", got, err, d)
	}
	if got, err := ParseSHA256Sum(strings.ToUpper(d)+" *c.tar.gz\n", "c.tar.gz"); err != nil || got != d {
		t.Errorf("binary mode, upper case: %q, %v; want %q", got, err, d)
	}
	if _, err := ParseSHA256Sum(content, "other.tar.gz"); err == nil {
		t.Error("no line for the file: want an error")
	}
	if _, err := ParseSHA256Sum("xyz  c.tar.gz\n", "c.tar.gz"); err == nil {
		t.Error("not a digest: want an error")
	}
}

func tarGz(t *testing.T, files map[string]string) string {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(files[n])), Typeflag: tar.TypeReg})
		tw.Write([]byte(files[n]))
	}
	tw.Close()
	gz.Close()
	p := filepath.Join(t.TempDir(), "c.tar.gz")
	os.WriteFile(p, buf.Bytes(), 0o600)
	return p
}

func TestExtractContainerd(t *testing.T) {
	arch := tarGz(t, map[string]string{
		"bin/containerd.exe":                "new containerd",
		"bin/containerd-shim-runhcs-v1.exe": "new shim",
		"bin/ctr.exe":                       "new ctr",
		"bin/../../evil.exe":                "escape",
		"config.toml":                       "not ours",
		"bin/readme.txt":                    "not a binary",
	})
	dir := filepath.Join(t.TempDir(), "new")
	got, err := ExtractContainerd(arch, dir)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	if want := []string{"containerd-shim-runhcs-v1.exe", "containerd.exe", "ctr.exe"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("extracted %v, want %v", got, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("dir holds %d files, want the 3 binaries only", len(entries))
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "..", "evil.exe")); err == nil {
		t.Error("a path in the archive escaped the folder")
	}
	if _, err := ExtractContainerd(tarGz(t, map[string]string{"bin/ctr.exe": "x"}), t.TempDir()); err == nil {
		t.Error("an archive without containerd.exe: want an error")
	}
}

func TestOfficialContainerd(t *testing.T) {
	a, s := OfficialContainerdFrom(ContainerdReleases, "v1.7.22")
	if a != "https://github.com/containerd/containerd/releases/download/v1.7.22/containerd-1.7.22-windows-amd64.tar.gz" || s != a+".sha256sum" {
		t.Errorf("= %s, %s", a, s)
	}
}

// cutting is a file server (Range and If-Range as net/http serves them)
// whose first `cuts` answers stop after half of what they promised, the
// connection reset (a proxy giving up on a long transfer). It records each
// request's Range header and how many bytes it sent.
type cutting struct {
	file    []byte
	etag    string
	cuts    int
	ranges  []string
	served  int64
	ignores bool // answers every request with the whole file (no Range support)
}

func (c *cutting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.ranges = append(c.ranges, r.Header.Get("Range"))
	if c.ignores {
		r.Header.Del("Range")
	}
	w.Header().Set("ETag", c.etag)
	if len(c.ranges) > c.cuts {
		cw := &counting{ResponseWriter: w, n: &c.served}
		http.ServeContent(cw, r, "kb.msu", time.Time{}, bytes.NewReader(c.file))
		return
	}
	start := 0
	if rg := r.Header.Get("Range"); rg != "" {
		fmt.Sscanf(rg, "bytes=%d-", &start)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(c.file)-1, len(c.file)))
		w.Header().Set("Content-Length", strconv.Itoa(len(c.file)-start))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.Header().Set("Content-Length", strconv.Itoa(len(c.file)))
	}
	half := start + (len(c.file)-start)/2
	w.Write(c.file[start:half])
	c.served += int64(half - start)
	w.(http.Flusher).Flush()
	panic(http.ErrAbortHandler) // the connection is reset mid-body
}

type counting struct {
	http.ResponseWriter
	n *int64
}

func (c *counting) Write(b []byte) (int, error) {
	*c.n += int64(len(b))
	return c.ResponseWriter.Write(b)
}

// A download reset mid-body goes on from where it stopped (Range, If-Range
// the file's ETag), each time, within ResumeAttempts: what was downloaded is
// not downloaded again.
func TestADownloadCutMidBodyResumesWhereItStopped(t *testing.T) {
	file := bytes.Repeat([]byte("cumulative update "), 4096) // 72 KiB
	c := &cutting{file: file, etag: `"v1"`, cuts: 2}
	srv := httptest.NewTLSServer(c)
	t.Cleanup(srv.Close)
	dest := filepath.Join(t.TempDir(), "kb.msu")
	if err := Fetch(context.Background(), srv.Client(), Source{URL: srv.URL + "/kb.msu"}, dest, sum(file), MaxPackage); err != nil {
		t.Fatal(err)
	}
	half, quarter := len(file)/2, len(file)/2+len(file)/4
	want := []string{"", fmt.Sprintf("bytes=%d-", half), fmt.Sprintf("bytes=%d-", quarter)}
	if fmt.Sprint(c.ranges) != fmt.Sprint(want) {
		t.Errorf("requests asked %q, want %q", c.ranges, want)
	}
	if c.served != int64(len(file)) {
		t.Errorf("served %d bytes for a %d-byte file: some were downloaded twice", c.served, len(file))
	}

	// A server without Range support sends the whole file again: it starts over, and still lands.
	c = &cutting{file: file, etag: `"v1"`, cuts: 1, ignores: true}
	srv2 := httptest.NewTLSServer(c)
	t.Cleanup(srv2.Close)
	dest = filepath.Join(t.TempDir(), "kb.msu")
	if err := Fetch(context.Background(), srv2.Client(), Source{URL: srv2.URL + "/kb.msu"}, dest, sum(file), MaxPackage); err != nil {
		t.Fatalf("whole file again: %v", err)
	}
	// Cut more often than ResumeAttempts allows: it fails, saying how far it got.
	c = &cutting{file: file, etag: `"v1"`, cuts: ResumeAttempts + 1}
	srv3 := httptest.NewTLSServer(c)
	t.Cleanup(srv3.Close)
	err := Fetch(context.Background(), srv3.Client(), Source{URL: srv3.URL + "/kb.msu"}, filepath.Join(t.TempDir(), "kb.msu"), sum(file), MaxPackage)
	if err == nil || !strings.Contains(err.Error(), "resumed attempts") {
		t.Errorf("cut %d times: %v, want a failure naming the resumed attempts", ResumeAttempts+1, err)
	}
}

// A paced fetch takes no more than its pace: 1 MiB at 512 KiB/s cannot
// land in under 1.5 s (its first 256 KiB may come at once), from a URL or a
// share; the file is whole and checked as any fetch's.
func TestAPacedFetchTakesNoMoreThanItsPace(t *testing.T) {
	pkg := bytes.Repeat([]byte("kb5050002 "), 1<<20/10+1)[:1<<20]
	srv, _ := server(t, map[string][]byte{"/kb.msu": pkg})
	share := filepath.Join(t.TempDir(), "kb.msu")
	if err := os.WriteFile(share, pkg, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, src := range []Source{{URL: srv.URL + "/kb.msu"}, {Path: share}} {
		dest := filepath.Join(t.TempDir(), "kb.msu")
		began := time.Now()
		if err := FetchPaced(context.Background(), srv.Client(), src, dest, sum(pkg), MaxPackage, 512<<10); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took < 1500*time.Millisecond {
			t.Errorf("%s: 1 MiB at 512 KiB/s took %s", src, took)
		}
		if b, _ := os.ReadFile(dest); !bytes.Equal(b, pkg) {
			t.Errorf("%s: the staged file is not the package", src)
		}
	}
}
