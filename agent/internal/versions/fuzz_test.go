package versions

import "testing"

// A revision's runtime and CSI Proxy versions come from the API and are
// compared with what the host runs: the agent installs, or leaves alone, on
// that answer. Compare must be an order (or refuse): never say both a<b and
// b<a, never two answers for one pair, and a parsed version prints back as
// itself.
func FuzzCompare(f *testing.F) {
	for _, c := range compareCases {
		f.Add(c.a, c.b, "1.7.22")
	}
	f.Fuzz(func(t *testing.T, a, b, c string) {
		ab, errAB := Compare(a, b)
		ba, errBA := Compare(b, a)
		if (errAB == nil) != (errBA == nil) || ab != -ba {
			t.Fatalf("Compare(%q, %q) = %d, %v but Compare(%q, %q) = %d, %v", a, b, ab, errAB, b, a, ba, errBA)
		}
		if v, err := Parse(a); err == nil {
			if self, err := Compare(a, v.String()); err != nil || self != 0 {
				t.Fatalf("%q prints as %q, which compares %d, %v with it", a, v.String(), self, err)
			}
		}
		bc, errBC := Compare(b, c)
		ac, errAC := Compare(a, c)
		if errAB == nil && errBC == nil && errAC == nil && ab <= 0 && bc <= 0 && ac > 0 {
			t.Fatalf("%q <= %q <= %q but %q > %q", a, b, c, a, c)
		}
	})
}
