// Package stage brings files the agent installs onto the host (update
// packages, containerd release archives) and proves they are the ones the
// revision names: a file is used only once its sha256 matches, and a staged
// file is checked again before every use, since it may have been changed or
// truncated since (a crash mid-download, a disk full, a person).
package stage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/time/rate"
)

// MismatchError is a file whose digest is not the one expected.
type MismatchError struct {
	What, Want, Got string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s: sha256 is %s, the revision expects %s (a wrong or corrupted file; it was not installed)", e.What, e.Got, e.Want)
}

// Source is where a file comes from: an https URL, or a path on the host.
type Source struct {
	URL  string
	Path string
	// NoRedirect: the URL is one the cluster admin allowed by prefix (a pool's
	// runtime archive), so the download is taken from it alone. The operator
	// judged this URL, not wherever its server sends the request next.
	NoRedirect bool
}

func (s Source) String() string {
	if s.URL != "" {
		return s.URL
	}
	return s.Path
}

// The most each kind of file may hold: a download that grows past it (a
// wrong URL serving something else, a hostile server that never ends) is
// stopped there rather than filling the system drive the install needs.
const (
	// MaxPackage: an update package (.msu, .cab); Windows Server 2025's
	// checkpoint cumulative updates are several GB.
	MaxPackage = 16 << 30
	// MaxRuntimeArchive: a containerd release archive (tens of MB).
	MaxRuntimeArchive = 512 << 20
	// MaxSumFile: a .sha256sum file (one line).
	MaxSumFile = 64 << 10
)

// Fetch stages src as dest, whose sha256 must be want, reading at most max
// bytes. A dest already there with the right digest is used as it is
// (staged once, re-verified on every restart); one with another digest is
// replaced. Nothing is left at dest unless it matches.
func Fetch(ctx context.Context, client *http.Client, src Source, dest, want string, max int64) error {
	return FetchPaced(ctx, client, src, dest, want, max, 0)
}

// FetchPaced is Fetch reading at most perSecond bytes a second (0: as fast
// as the source gives them): a node that downloads while it serves leaves
// its workloads the rest of its link.
func FetchPaced(ctx context.Context, client *http.Client, src Source, dest, want string, max, perSecond int64) error {
	got, err := Digest(dest)
	switch {
	case err == nil && got == want:
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("reading the staged %s: %w", dest, err)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), filepath.Base(dest)+".*.part")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	copyErr := copyFrom(ctx, client, src, paced(ctx, tmp, perSecond), h, max)
	closeErr := tmp.Close()
	if copyErr != nil {
		return fmt.Errorf("%s: %w", src, copyErr)
	}
	if closeErr != nil {
		return closeErr
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return &MismatchError{What: src.String(), Want: want, Got: got}
	}
	return os.Rename(tmp.Name(), dest)
}

// ResumeAttempts is how many times a download cut mid-body (a proxy
// resetting a 1.5 GB transfer, a WAN blip) is picked up where it stopped,
// with a Range request, before it fails: starting over would download the
// whole file again each time, and a flaky link might never finish it.
const ResumeAttempts = 5

// copyFrom writes src into f (and h). A download cut mid-body goes on from
// the bytes already written when the server answers the Range request with
// that range of the same file (If-Range: its ETag or Last-Modified); one
// that sends the whole file again, or another file, starts over. The digest
// Fetch checks at the end holds either way.
func copyFrom(ctx context.Context, client *http.Client, src Source, f pacedFile, h hash.Hash, max int64) error {
	if src.URL == "" {
		r, err := os.Open(src.Path)
		if err != nil {
			return err
		}
		defer r.Close()
		_, err = io.Copy(io.MultiWriter(f, h), capped(r, max))
		return err
	}
	var written int64
	var validator string
	for attempt := 0; ; attempt++ {
		body, resumed, v, err := open(ctx, client, src, max, written, validator)
		if err != nil {
			return err
		}
		if !resumed && written > 0 {
			if err := restart(f.File, h); err != nil {
				body.Close()
				return err
			}
			written = 0
		}
		validator = v
		n, err := io.Copy(io.MultiWriter(f, h), capped(body, max-written))
		body.Close()
		written += n
		if err == nil || errors.Is(err, errTooLarge) || ctx.Err() != nil || attempt >= ResumeAttempts {
			if err != nil && attempt > 0 {
				err = fmt.Errorf("%w (after %d resumed attempts, %d bytes in)", err, attempt, written)
			}
			return err
		}
	}
}

// pacedFile is the file a download writes into: each write waits for its
// bytes under the pace (nil limit: none), so the reads that feed it slow
// down and TCP's window tells the source to send less.
type pacedFile struct {
	*os.File
	ctx   context.Context
	limit *rate.Limiter
}

// pacedBurst is the most a paced download writes at once.
const pacedBurst = 256 << 10

func paced(ctx context.Context, f *os.File, perSecond int64) pacedFile {
	if perSecond <= 0 {
		return pacedFile{File: f}
	}
	return pacedFile{File: f, ctx: ctx, limit: rate.NewLimiter(rate.Limit(perSecond), int(min(perSecond, pacedBurst)))}
}

func (p pacedFile) Write(b []byte) (int, error) {
	if p.limit == nil {
		return p.File.Write(b)
	}
	written := 0
	for len(b) > 0 {
		n := min(len(b), p.limit.Burst())
		if err := p.limit.WaitN(p.ctx, n); err != nil {
			return written, err
		}
		m, err := p.File.Write(b[:n])
		written += m
		if err != nil {
			return written, err
		}
		b = b[n:]
	}
	return written, nil
}

// restart empties a partly written download to start it over.
func restart(f *os.File, h hash.Hash) error {
	h.Reset()
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.Seek(0, io.SeekStart)
	return err
}

// Get opens an https URL's body, of at most max bytes; anything but 200 is
// an error naming the status, and so is a redirect off https (the digest
// would still catch a changed file, but the request, and what it tells an
// observer, would have left TLS).
func Get(ctx context.Context, client *http.Client, url string, max int64) (io.ReadCloser, error) {
	body, _, _, err := open(ctx, client, Source{URL: url}, max, 0, "")
	return body, err
}

// open is Get from byte offset on: with offset > 0 it asks for the rest
// (Range), only if the file is still the one validator names (If-Range),
// and says whether the answer is that rest (206 from offset) or the whole
// file (200). It returns the file's validator for a later resume.
func open(ctx context.Context, client *http.Client, src Source, max, offset int64, validator string) (io.ReadCloser, bool, string, error) {
	url := src.URL
	if !strings.HasPrefix(url, "https://") {
		return nil, false, "", fmt.Errorf("%s is not an https URL", url)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, false, "", err
	}
	if offset > 0 && validator != "" {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
		req.Header.Set("If-Range", validator)
	}
	c := *client
	c.CheckRedirect = func(next *http.Request, via []*http.Request) error {
		switch {
		case src.NoRedirect:
			return fmt.Errorf("redirected to %s: an archive the pool names is downloaded only from the URL the operator allowed; name the URL that serves it", next.URL.Redacted())
		case next.URL.Scheme != "https":
			return fmt.Errorf("redirected to %s: downloads stay on https", next.URL.Redacted())
		case len(via) >= 10:
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, false, "", fmt.Errorf("downloading (does the node reach this host, directly or through its proxy?): %w", err)
	}
	resumed := resp.StatusCode == http.StatusPartialContent && strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", offset))
	if resp.StatusCode != http.StatusOK && !resumed {
		resp.Body.Close()
		return nil, false, "", fmt.Errorf("downloading: HTTP %s", resp.Status)
	}
	if resp.ContentLength > max-offset && resumed || resp.ContentLength > max {
		resp.Body.Close()
		return nil, false, "", fmt.Errorf("downloading: the server announces %d bytes, more than the %d this file may hold", resp.ContentLength, max)
	}
	// A weak ETag cannot validate a range (RFC 9110): Last-Modified then.
	v := resp.Header.Get("ETag")
	if v == "" || strings.HasPrefix(v, "W/") {
		v = resp.Header.Get("Last-Modified")
	}
	return struct {
		io.Reader
		io.Closer
	}{capped(resp.Body, max), resp.Body}, resumed, v, nil
}

// capped reads r to its end, failing once it holds more than max bytes.
func capped(r io.Reader, max int64) io.Reader { return &capReader{r: r, left: max} }

type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, errTooLarge
	}
	return n, err
}

var errTooLarge = errors.New("more bytes than this file may hold: stopped")

// Digest is a file's sha256 in lowercase hex.
func Digest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ParseSHA256Sum reads a sha256sum file ("<hex>  <name>" lines, "*" before
// the name in binary mode) and returns the digest of name.
func ParseSHA256Sum(content, name string) (string, error) {
	for _, line := range strings.Split(content, "\n") {
		fields := strings.Fields(line)
		if len(fields) != 2 {
			continue
		}
		if strings.TrimPrefix(fields[1], "*") != name {
			continue
		}
		d := strings.ToLower(fields[0])
		if len(d) != 64 || strings.Trim(d, "0123456789abcdef") != "" {
			return "", fmt.Errorf("the sha256sum line for %s holds %q, not a sha256", name, fields[0])
		}
		return d, nil
	}
	return "", fmt.Errorf("the sha256sum file has no line for %s", name)
}
