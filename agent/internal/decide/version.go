package decide

import (
	"fmt"
	"strconv"
	"strings"
)

// CompareVersions orders two versions by semver precedence: a leading "v" and
// "+build" metadata are ignored (so containerd's "1.7.17+azure" is 1.7.17),
// and pre-release identifiers compare numerically when both are numbers (so
// 2.0.0-rc.10 is after 2.0.0-rc.9). It returns -1, 0 or +1, or an error when
// either side is not MAJOR.MINOR.PATCH[-PRE][+BUILD].
func CompareVersions(a, b string) (int, error) {
	va, err := parseSemver(a)
	if err != nil {
		return 0, err
	}
	vb, err := parseSemver(b)
	if err != nil {
		return 0, err
	}
	return va.compare(vb), nil
}

type semver struct {
	core [3]uint64
	pre  []string
}

func parseSemver(s string) (semver, error) {
	bad := func(why string) (semver, error) {
		return semver{}, fmt.Errorf("%q is not a version (MAJOR.MINOR.PATCH[-PRE][+BUILD]): %s", s, why)
	}
	v := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexByte(v, '+'); i >= 0 {
		if !validIdentifiers(v[i+1:]) {
			return bad("bad build metadata")
		}
		v = v[:i]
	}
	var out semver
	if i := strings.IndexByte(v, '-'); i >= 0 {
		if !validIdentifiers(v[i+1:]) {
			return bad("bad pre-release")
		}
		out.pre = strings.Split(v[i+1:], ".")
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return bad("want three numbers")
	}
	for i, p := range parts {
		if !isNumber(p) {
			return bad("want three numbers")
		}
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return bad("number too large")
		}
		out.core[i] = n
	}
	return out, nil
}

func (a semver) compare(b semver) int {
	for i := range a.core {
		if c := cmpUint(a.core[i], b.core[i]); c != 0 {
			return c
		}
	}
	// A release ranks above any of its pre-releases.
	switch {
	case len(a.pre) == 0 && len(b.pre) == 0:
		return 0
	case len(a.pre) == 0:
		return 1
	case len(b.pre) == 0:
		return -1
	}
	for i := 0; i < len(a.pre) && i < len(b.pre); i++ {
		if c := comparePreIdentifier(a.pre[i], b.pre[i]); c != 0 {
			return c
		}
	}
	return cmpUint(uint64(len(a.pre)), uint64(len(b.pre)))
}

// comparePreIdentifier: numbers by value and below words; words in ASCII order.
func comparePreIdentifier(a, b string) int {
	an, bn := isNumber(a), isNumber(b)
	switch {
	case an && bn:
		// Compare by length first so that long numbers cannot overflow.
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if c := cmpUint(uint64(len(a)), uint64(len(b))); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	case an:
		return -1
	case bn:
		return 1
	}
	return strings.Compare(a, b)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func validIdentifiers(s string) bool {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		for _, c := range id {
			if !(c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				return false
			}
		}
	}
	return true
}
