package versions

import "testing"

func TestFromContainerd(t *testing.T) {
	cases := []struct {
		name, output, want string
	}{
		{"upstream 1.7 release", "containerd github.com/containerd/containerd v1.7.22 7f7fdf5fed64eb6a7caf99b3e12efcf9d60e311c\n", "1.7.22"},
		{"upstream 2.0 release candidate", "containerd github.com/containerd/containerd/v2 v2.0.0-rc.3 27de5fea738a38345aa1ac7569032261a6b1e562", "2.0.0-rc.3"},
		{"Docker's containerd.io package", "containerd containerd.io 1.7.17+azure-1 abc123", "1.7.17+azure-1"},
		{"AKS build with vendor metadata", "containerd github.com/containerd/containerd v1.7.15+azure 5e8d1a2f7c3b4d6e9f0a1b2c3d4e5f6a7b8c9d0e", "1.7.15+azure"},
		{"Windows binary name", "containerd.exe github.com/containerd/containerd v1.6.21 3dce8eb055cbb6872793272b4f20ed16117344f8\r\n", "1.6.21"},
		// An all-digit revision must never be read as the version.
		{"numeric revision after the version", "containerd github.com/containerd/containerd v1.7.1 1234567890", "1.7.1"},
		{"a warning line before the version line", "time=\"2024\" level=warning msg=\"config\"\ncontainerd github.com/containerd/containerd v1.7.22 7f7fdf5f", "1.7.22"},
		{"no revision printed", "containerd github.com/containerd/containerd v1.7.22", "1.7.22"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := FromContainerd(c.output)
			if err != nil {
				t.Fatalf("FromContainerd(%q): %v", c.output, err)
			}
			if got != c.want {
				t.Errorf("FromContainerd(%q) = %q, want %q", c.output, got, c.want)
			}
		})
	}
}

func TestFromContainerdRejectsGarbage(t *testing.T) {
	for _, out := range []string{
		"",
		"'containerd' is not recognized as an internal or external command",
		"containerd github.com/containerd/containerd",
		// The version slot holds no version: the digits in the revision must not be used.
		"containerd github.com/containerd/containerd unknown 1.7.22",
		"containerd github.com/containerd/containerd 7f7fdf5fed64eb6a7caf99b3e12efcf9d60e311c",
		"ctr github.com/containerd/containerd v1.7.22 7f7fdf5f",
	} {
		if v, err := FromContainerd(out); err == nil {
			t.Errorf("FromContainerd(%q) = %q, want an error", out, v)
		}
	}
}
