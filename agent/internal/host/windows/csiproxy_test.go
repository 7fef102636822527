package windows

import "testing"

func TestServiceBinary(t *testing.T) {
	for in, want := range map[string]string{
		`C:\k\csi-proxy.exe -windows-service -log_file=C:\k\csi-proxy.log -logtostderr=false`: `C:\k\csi-proxy.exe`,
		`"C:\Program Files\csi proxy\csi-proxy.exe" -windows-service`:                         `C:\Program Files\csi proxy\csi-proxy.exe`,
		`C:\Program Files\csi\csi-proxy.exe`:                                                  `C:\Program Files\csi\csi-proxy.exe`,
		`C:\k\csiproxy`:                                                                       `C:\k\csiproxy`,
	} {
		if got := serviceBinary(in); got != want {
			t.Errorf("serviceBinary(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCSIProxyVersion(t *testing.T) {
	for _, tc := range []struct{ product, binary, want string }{
		{"v1.1.3", `C:\k\csi-proxy.exe`, "1.1.3"},
		{"", `C:\k\csi-proxy\v1.1.2-hotfix.20230807\csi-proxy.exe`, "1.1.2-hotfix.20230807"},
		{"", `C:\k\csi-proxy-v1.1.3.exe`, "1.1.3"},
		{"0.0.0.0", `C:\k\csi-proxy.exe`, "unknown"},
		{"", `C:\k\csi-proxy.exe`, "unknown"},
	} {
		if got := csiProxyVersion(tc.product, tc.binary); got != tc.want {
			t.Errorf("csiProxyVersion(%q, %q) = %q, want %q", tc.product, tc.binary, got, tc.want)
		}
	}
}
