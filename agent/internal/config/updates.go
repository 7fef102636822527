package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// UpdateSource is where a revision's update comes from.
type UpdateSource string

const (
	// SourceWindowsUpdate: Windows Update, or the WSUS server the node's
	// policy points it at.
	SourceWindowsUpdate UpdateSource = "WindowsUpdate"
	// SourcePackages: the .msu/.cab files listed, in that order.
	SourcePackages UpdateSource = "Packages"
)

// Updates is the revision's "updates" field.
type Updates struct {
	Source UpdateSource `json:"source"`
	// Packages are installed in this order (servicing stack first); only
	// with SourcePackages.
	Packages []Package `json:"packages,omitempty"`
	// KBs pin, with SourceWindowsUpdate, exactly which offered updates are
	// installed (by KB ID, "KB5044281"), in this order.
	KBs []string `json:"kbs,omitempty"`
}

// Package is one update file. Exactly one of URL and Path is set.
type Package struct {
	URL  string `json:"url,omitempty"`
	Path string `json:"path,omitempty"`
	// SHA256 is 64 lowercase hex digits, checked before the file is installed.
	SHA256 string `json:"sha256"`
}

// Name is how messages name the package: its URL or its path.
func (p Package) Name() string {
	if p.URL != "" {
		return p.URL
	}
	return p.Path
}

// FileName is the last element of the URL's path or of the host path.
func (p Package) FileName() string {
	if p.URL != "" {
		if u, err := url.Parse(p.URL); err == nil {
			return lastElem(u.Path)
		}
	}
	return lastElem(p.Path)
}

func lastElem(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// Archive is a release archive to download and check.
type Archive struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}

func (u *Updates) validate() error {
	if u == nil {
		return nil
	}
	switch u.Source {
	case SourceWindowsUpdate:
		if len(u.Packages) > 0 {
			return errors.New(`source WindowsUpdate takes no packages (use source "Packages")`)
		}
		for i, kb := range u.KBs {
			if !validKB(kb) {
				return fmt.Errorf("kbs[%d] %q is not a KB ID such as KB5044281", i, kb)
			}
		}
		return nil
	case SourcePackages:
		if len(u.KBs) > 0 {
			return errors.New(`source "Packages" takes no kbs: the files are the pin`)
		}
	default:
		return fmt.Errorf("source %q is neither %q nor %q", u.Source, SourceWindowsUpdate, SourcePackages)
	}
	if len(u.Packages) == 0 {
		return errors.New(`source "Packages" lists no packages`)
	}
	seen := map[string]int{}
	for i, p := range u.Packages {
		if err := p.validate(); err != nil {
			return fmt.Errorf("packages[%d]: %w", i, err)
		}
		// Every package is staged into one folder (DISM finds a checkpoint
		// update's prerequisites there), so two files of one name would
		// overwrite each other.
		name := strings.ToLower(p.FileName())
		if j, dup := seen[name]; dup {
			return fmt.Errorf("packages[%d] and packages[%d] are both named %q: they are staged into one folder", j, i, p.FileName())
		}
		seen[name] = i
	}
	return nil
}

func (p Package) validate() error {
	switch {
	case p.URL != "" && p.Path != "":
		return errors.New("has both url and path; give exactly one")
	case p.URL == "" && p.Path == "":
		return errors.New("has neither url nor path; give exactly one")
	}
	if p.URL != "" {
		u, err := url.Parse(p.URL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("url %q is not an https:// URL", p.URL)
		}
	} else if !isAbsWindowsPath(p.Path) {
		return fmt.Errorf(`path %q is not an absolute Windows path such as C:\updates\kb.msu`, p.Path)
	}
	if ext := strings.ToLower(p.FileName()); !strings.HasSuffix(ext, ".msu") && !strings.HasSuffix(ext, ".cab") {
		return fmt.Errorf("%s: only .msu and .cab files can be installed", p.Name())
	}
	return validSHA256(p.SHA256)
}

func (a *Archive) validate() error {
	u, err := url.Parse(a.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("url %q is not an https:// URL", a.URL)
	}
	if !strings.HasSuffix(strings.ToLower(u.Path), ".tar.gz") {
		return fmt.Errorf("url %q is not a .tar.gz archive (containerd releases are)", a.URL)
	}
	return validSHA256(a.SHA256)
}

func validSHA256(s string) error {
	if len(s) != 64 {
		return fmt.Errorf("sha256 %q is not 64 lowercase hex digits", s)
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("sha256 %q is not 64 lowercase hex digits", s)
		}
	}
	return nil
}

// validKB: "KB" and 6 to 8 digits, as the CRD allows.
func validKB(s string) bool {
	digits, ok := strings.CutPrefix(s, "KB")
	if !ok || len(digits) < 6 || len(digits) > 8 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isAbsWindowsPath: a drive path (C:\...) or a UNC path (\\server\share\...).
func isAbsWindowsPath(p string) bool {
	if strings.HasPrefix(p, `\\`) {
		return len(p) > 2
	}
	return len(p) >= 3 && (('A' <= p[0] && p[0] <= 'Z') || ('a' <= p[0] && p[0] <= 'z')) && p[1] == ':' && (p[2] == '\\' || p[2] == '/')
}
