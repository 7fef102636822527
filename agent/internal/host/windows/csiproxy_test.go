package windows

import (
	"slices"
	"testing"

	"winpool.dev/agent/internal/host"
)

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

func TestPickCSIProxy(t *testing.T) {
	aks := host.Service{Name: "csi-proxy", Wrapper: host.WrapperNSSM, Program: `C:\k\csi-proxy.exe`}
	aksUp := aks
	aksUp.Running = true
	upstream := host.Service{Name: "csiproxy", Program: `C:\etc\kubernetes\node\bin\csi-proxy.exe`}
	upstreamUp := upstream
	upstreamUp.Running = true
	for _, tc := range []struct {
		name      string
		installed []host.Service
		want      host.Service
		wantOK    bool
	}{
		{"none installed", nil, host.Service{}, false},
		{"AKS only", []host.Service{aksUp}, aksUp, true},
		{"upstream only, stopped", []host.Service{upstream}, upstream, true},
		{"both running: csi-proxy first", []host.Service{aksUp, upstreamUp}, aksUp, true},
		{"both stopped: csi-proxy first", []host.Service{aks, upstream}, aks, true},
		{"only the later one runs", []host.Service{aks, upstreamUp}, upstreamUp, true},
	} {
		got, ok := pickCSIProxy(tc.installed)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: pickCSIProxy = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestCSIProxyServicesOrder(t *testing.T) {
	if want := []string{"csi-proxy", "csiproxy"}; !slices.Equal(csiProxyServices, want) {
		t.Errorf("csiProxyServices = %q, want %q", csiProxyServices, want)
	}
}

func TestCSIProxyPipes(t *testing.T) {
	pipes := csiProxyPipes()
	// The v1 pipes first: any CSI Proxy since v1.0.0 answers on the first.
	if want := []string{
		`\\.\pipe\csi-proxy-filesystem-v1`,
		`\\.\pipe\csi-proxy-disk-v1`,
		`\\.\pipe\csi-proxy-volume-v1`,
		`\\.\pipe\csi-proxy-smb-v1`,
	}; len(pipes) < len(want) || !slices.Equal(pipes[:len(want)], want) {
		t.Errorf("csiProxyPipes starts %q, want %q", pipes[:min(len(pipes), len(want))], want)
	}
	for _, tc := range []struct {
		pipe string
		want bool
	}{
		{`\\.\pipe\csi-proxy-disk-v1beta3`, true},
		{`\\.\pipe\csi-proxy-volume-v1beta3`, true},
		{`\\.\pipe\csi-proxy-smb-v1beta2`, true},
		{`\\.\pipe\csi-proxy-filesystem-v1beta1`, true},
		{`\\.\pipe\csi-proxy-filesystem-v1alpha1`, true},
		{`\\.\pipe\csi-proxy-smb-v1alpha1`, true},
		// No CSI Proxy ever served these.
		{`\\.\pipe\csi-proxy-filesystem-v1beta3`, false},
		{`\\.\pipe\csi-proxy-smb-v1beta3`, false},
	} {
		if got := slices.Contains(pipes, tc.pipe); got != tc.want {
			t.Errorf("csiProxyPipes contains %s: %v, want %v", tc.pipe, got, tc.want)
		}
	}
	if len(pipes) != 18 {
		t.Errorf("csiProxyPipes has %d pipes, want 18: %q", len(pipes), pipes)
	}
	if len(pipes) != len(slices.Compact(slices.Sorted(slices.Values(pipes)))) {
		t.Errorf("csiProxyPipes has duplicates: %q", pipes)
	}
}
