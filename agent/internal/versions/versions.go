// Package versions orders the versions the agent reads from the host
// (containerd, CSI Proxy) against the ones a revision asks for, by semver
// precedence, with apimachinery's parser: a leading "v" and "+build"
// metadata are ignored (containerd on AKS says "1.7.17+azure"), and
// pre-releases rank below their release.
package versions

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
)

// Compare returns -1, 0 or +1 as a orders before, with or after b, or an
// error when either is not MAJOR.MINOR.PATCH[-PRE][+BUILD].
func Compare(a, b string) (int, error) {
	va, err := Parse(a)
	if err != nil {
		return 0, err
	}
	vb, err := Parse(b)
	if err != nil {
		return 0, err
	}
	switch {
	case va.LessThan(vb):
		return -1, nil
	case vb.LessThan(va):
		return 1, nil
	}
	return 0, nil
}

// Parse reads s as a semantic version, saying what is wrong when it is not one.
func Parse(s string) (*version.Version, error) {
	v, err := version.ParseSemantic(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a version (MAJOR.MINOR.PATCH[-PRE][+BUILD]): %w", s, err)
	}
	return v, nil
}
