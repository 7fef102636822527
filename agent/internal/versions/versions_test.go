package versions

import "testing"

// compareCases also seed FuzzCompare.
var compareCases = []struct {
	a, b string
	want int
}{
	{"1.7.22", "1.7.22", 0},
	{"v1.7.22", "1.7.22", 0},
	{"1.7.17+azure", "1.7.17", 0},
	{"1.7.17+azure-1", "v1.7.17", 0},
	{"1.7.17+azure", "1.7.17+other", 0},
	{"1.7.20", "1.7.22", -1},
	{"1.7.22", "1.6.99", 1},
	{"1.10.0", "1.9.0", 1},
	{"2.0.0-rc.10", "2.0.0-rc.9", 1},
	{"2.0.0-rc.9", "2.0.0-rc.10", -1},
	{"2.0.0-rc.3", "2.0.0", -1},
	{"2.0.0", "2.0.0-rc.3", 1},
	{"2.0.0-beta.1", "2.0.0-rc.1", -1},
	{"2.0.0-rc", "2.0.0-rc.1", -1},
	{"2.0.0-1", "2.0.0-rc", -1},
	{"2.0.0-rc.3+build.5", "2.0.0-rc.3", 0},
}

func TestCompare(t *testing.T) {
	for _, c := range compareCases {
		got, err := Compare(c.a, c.b)
		if err != nil {
			t.Errorf("Compare(%q, %q): %v", c.a, c.b, err)
			continue
		}
		if got != c.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestCompareVersionsRejectsNonVersions(t *testing.T) {
	for _, v := range []string{"", "1.7", "1.7.x", "1.7.22.1", "latest", "1.7.22-", "1.7.22+", "1.7.22-rc..1", "1.6.20~ds1"} {
		if _, err := Compare(v, "1.7.22"); err == nil {
			t.Errorf("Compare(%q, …) accepted a non-version", v)
		}
	}
}
