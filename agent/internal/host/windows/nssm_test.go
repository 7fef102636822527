package windows

import (
	"testing"

	"winpool.dev/agent/internal/host"
)

func TestServiceWrapperAndProgram(t *testing.T) {
	for _, tc := range []struct {
		name, imagePath, application string
		wrapper                      host.Wrapper
		program                      string
	}{
		{"AKS csi-proxy under NSSM", `C:\k\nssm.exe`, `C:\k\csi-proxy.exe`, host.WrapperNSSM, `C:\k\csi-proxy.exe`},
		{"NSSM quoted, with arguments, upper case", `"C:\Program Files\NSSM\NSSM.EXE" -s`, `C:\Program Files\containerd\containerd.exe`, host.WrapperNSSM, `C:\Program Files\containerd\containerd.exe`},
		{"NSSM without .exe", `C:\k\nssm`, `C:\k\kubelet.exe`, host.WrapperNSSM, `C:\k\kubelet.exe`},
		{"NSSM Application quoted", `C:\k\nssm.exe`, ` "C:\k\csi proxy\csi-proxy.exe" `, host.WrapperNSSM, `C:\k\csi proxy\csi-proxy.exe`},
		{"NSSM without Application", `C:\k\nssm.exe`, "", host.WrapperNSSM, ""},
		{"sc.exe create csiproxy", `C:\etc\kubernetes\node\bin\csi-proxy.exe -windows-service -log_file=C:\etc\kubernetes\logs\csi-proxy.log -logtostderr=false`, "", host.WrapperNone, `C:\etc\kubernetes\node\bin\csi-proxy.exe`},
		{"containerd --register-service", `"C:\Program Files\containerd\containerd.exe" --run-service`, "", host.WrapperNone, `C:\Program Files\containerd\containerd.exe`},
		// Only the executable's name counts, not a folder named nssm nor
		// an argument.
		{"folder named nssm", `C:\nssm\containerd.exe --run-service`, "", host.WrapperNone, `C:\nssm\containerd.exe`},
		{"nssm in the arguments", `C:\k\csi-proxy.exe -wrapper nssm.exe`, "", host.WrapperNone, `C:\k\csi-proxy.exe`},
		{"a name ending in nssm", `C:\tools\notnssm.exe`, "", host.WrapperNone, `C:\tools\notnssm.exe`},
		// An Application value on a service NSSM does not run is not what
		// the service runs.
		{"stale Application without NSSM", `C:\k\csi-proxy.exe`, `C:\old\csi-proxy.exe`, host.WrapperNone, `C:\k\csi-proxy.exe`},
	} {
		w := serviceWrapper(tc.imagePath)
		if w != tc.wrapper {
			t.Errorf("%s: serviceWrapper(%q) = %q, want %q", tc.name, tc.imagePath, w, tc.wrapper)
		}
		if got := serviceProgram(tc.imagePath, w, tc.application); got != tc.program {
			t.Errorf("%s: serviceProgram(%q, %q, %q) = %q, want %q", tc.name, tc.imagePath, w, tc.application, got, tc.program)
		}
	}
}

func TestNSSMParametersKey(t *testing.T) {
	if got, want := nssmParametersKey("csi-proxy"), `SYSTEM\CurrentControlSet\Services\csi-proxy\Parameters`; got != want {
		t.Errorf("nssmParametersKey = %q, want %q", got, want)
	}
}
