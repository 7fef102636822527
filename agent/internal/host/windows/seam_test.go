package windows

// The logic above the System seam, run on Linux over fakeSystem.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"winpool.dev/agent/internal/host"
)

func init() { servicePoll = time.Millisecond }

// AKS runs containerd under NSSM with its program in a REG_EXPAND_SZ; an
// image that registered containerd itself runs it from its ImagePath; a
// service that is not installed is left out.
func TestServicesAreReadWithTheProgramTheyRun(t *testing.T) {
	sys := newFakeSystem()
	sys.services["containerd"] = &fakeService{imagePath: `C:\k\nssm.exe`, states: []ServiceStatus{status(ServiceRunning)}}
	sys.registry[`SYSTEM\CurrentControlSet\Services\containerd\Parameters\Application`] = fakeValue{s: `%ProgramFiles%\containerd\containerd.exe`, expand: true}
	sys.env["ProgramFiles"] = `C:\Program Files`
	sys.services["csiproxy"] = &fakeService{imagePath: `"C:\etc\kubernetes\node\bin\csi-proxy.exe" -windows-service`, states: []ServiceStatus{status(ServiceStopped)}}

	got, err := readServices(sys, "csi-proxy", "containerd", "csiproxy")
	if err != nil {
		t.Fatal(err)
	}
	want := []host.Service{
		{Name: "containerd", Wrapper: host.WrapperNSSM, Program: `C:\Program Files\containerd\containerd.exe`, Running: true},
		{Name: "csiproxy", Wrapper: host.WrapperNone, Program: `C:\etc\kubernetes\node\bin\csi-proxy.exe`, Running: false},
	}
	if !slices.Equal(got, want) {
		t.Errorf("services\n got %+v\nwant %+v", got, want)
	}

	// NSSM without an Application: the program is unknown, not an error.
	delete(sys.registry, `SYSTEM\CurrentControlSet\Services\containerd\Parameters\Application`)
	got, _ = readServices(sys, "containerd")
	if len(got) != 1 || got[0].Program != "" || got[0].Wrapper != host.WrapperNSSM {
		t.Errorf("NSSM without Application: %+v", got)
	}

	// A service the manager cannot query is an error naming it.
	sys.services["containerd"].queryErr = errors.New("Access is denied.")
	if _, err := readServices(sys, "containerd"); err == nil || !strings.Contains(err.Error(), "querying service containerd: Access is denied.") {
		t.Errorf("error %v", err)
	}
}

// A stop is sent only to a service that runs, and waited for until it has
// stopped; a start that dies says its exit codes; a start that never
// finishes ends with the context, naming the state it is stuck in.
func TestServicesAreStoppedAndStartedAndWaitedFor(t *testing.T) {
	ctx := context.Background()
	sys := newFakeSystem()
	sys.services["kubelet"] = &fakeService{imagePath: `C:\k\kubelet.exe`, states: []ServiceStatus{status(ServiceRunning)},
		onStop:  []ServiceStatus{status(ServiceStopPending), status(ServiceStopPending), status(ServiceStopped)},
		onStart: []ServiceStatus{status(ServiceStartPending), status(ServiceRunning)}}

	if err := stopService(ctx, sys, "kubelet"); err != nil {
		t.Fatal(err)
	}
	stops := func() int {
		return len(slices.DeleteFunc(slices.Clone(sys.calls), func(c string) bool { return c != "stop kubelet" }))
	}
	if stops() != 1 {
		t.Errorf("calls %q: want one stop control", sys.calls)
	}
	if err := stopService(ctx, sys, "kubelet"); err != nil || stops() != 1 {
		t.Errorf("a stopped service: %v, calls %q (no second stop control)", err, sys.calls)
	}
	if err := startService(ctx, sys, "kubelet"); err != nil {
		t.Fatal(err)
	}
	if err := startService(ctx, sys, "kubelet"); err != nil {
		t.Errorf("starting a running service: %v", err)
	}

	sys.services["containerd"] = &fakeService{states: []ServiceStatus{status(ServiceStopped)},
		onStart: []ServiceStatus{status(ServiceStartPending), {State: ServiceStopped, Win32ExitCode: 1067}}}
	// Bounded, so that a wait that missed the death fails here rather than hangs.
	dying, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	err := startService(dying, sys, "containerd")
	if err == nil || !strings.Contains(err.Error(), "service containerd: stopped while starting (exit code 1067") {
		t.Errorf("a start that dies: %v", err)
	}

	sys.services["hung"] = &fakeService{states: []ServiceStatus{status(ServiceStopped)}, onStart: []ServiceStatus{status(ServiceStartPending)}}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err = startService(short, sys, "hung")
	if err == nil || !strings.Contains(err.Error(), "service hung: still StartPending, not Running") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a start that hangs: %v", err)
	}
	if err := stopService(ctx, sys, "missing"); !errors.Is(err, ErrNoService) {
		t.Errorf("stopping a service that is not installed: %v", err)
	}
}

// The WSUS policy as Group Policy writes it (a string and a DWORD in two
// keys); absent keys or values are no WSUS.
func TestTheWindowsUpdatePolicyIsReadFromTheRegistry(t *testing.T) {
	sys := newFakeSystem()
	if p, err := readWUPolicy(sys); err != nil || p != (wuPolicy{}) {
		t.Errorf("no policy: %+v %v", p, err)
	}
	sys.registry[wuPolicyKey+`\WUServer`] = fakeValue{s: "https://wsus.corp:8531"}
	if p, err := readWUPolicy(sys); err != nil || p != (wuPolicy{WUServer: "https://wsus.corp:8531"}) {
		t.Errorf("a server named but not used: %+v %v", p, err)
	}
	sys.integers[wuPolicyAUKey+`\UseWUServer`] = 1
	if p, err := readWUPolicy(sys); err != nil || p != (wuPolicy{WUServer: "https://wsus.corp:8531", UseWUServer: 1}) {
		t.Errorf("WSUS: %+v %v", p, err)
	}
}

// The build the kubelet reports, read as Windows keeps it (three DWORDs and
// a string), and what servicing leaves behind when it needs a reboot.
func TestTheBuildAndTheRebootSignalsAreReadFromTheRegistry(t *testing.T) {
	sys := newFakeSystem()
	for name, v := range map[string]uint64{"CurrentMajorVersionNumber": 10, "CurrentMinorVersionNumber": 0, "UBR": 2762} {
		sys.integers[currentVersionKey+`\`+name] = v
	}
	sys.registry[currentVersionKey+`\CurrentBuildNumber`] = fakeValue{s: "20348"}
	if b, err := readBuild(sys); err != nil || b.String() != "10.0.20348.2762" {
		t.Errorf("build %v, %v", b, err)
	}
	sys.registry[currentVersionKey+`\CurrentBuildNumber`] = fakeValue{s: "20348a"}
	if _, err := readBuild(sys); err == nil || !strings.Contains(err.Error(), `CurrentBuildNumber is "20348a", not a number`) {
		t.Errorf("a garbled build: %v", err)
	}
	delete(sys.integers, currentVersionKey+`\UBR`)
	if _, err := readBuild(sys); !errors.Is(err, ErrNotExist) || !strings.Contains(err.Error(), `\UBR`) {
		t.Errorf("no UBR: %v", err)
	}

	if s, err := rebootSignals(sys); err != nil || s.CBSRebootPending || s.WURebootRequired || len(s.FileRenames) != 0 {
		t.Errorf("nothing pending: %+v %v", s, err)
	}
	sys.keys[cbsRebootPending] = true
	sys.multi[sessionManagerKey+`\PendingFileRenameOperations`] = []string{`\??\C:\Windows\WinSxS\Temp\x`, ""}
	sys.multi[sessionManagerKey+`\PendingFileRenameOperations2`] = []string{`\??\C:\k\containerd.exe`}
	s, err := rebootSignals(sys)
	if err != nil || !s.CBSRebootPending || s.WURebootRequired || len(s.FileRenames) != 3 || s.FileRenames[2] != `\??\C:\k\containerd.exe` {
		t.Errorf("pending: %+v %v", s, err)
	}
}

// The state folder on a new node is created with the agent's DACL; one an
// older agent created (owned by SYSTEM, inheriting %ProgramData%'s ACL) gets
// the agent's DACL; one a user created first is refused before any DACL is
// set, naming the owner; a link where a sub-folder should be is refused
// without setting a DACL through it.
func TestTheStateFolderIsSecuredOrRefused(t *testing.T) {
	fresh := func(t *testing.T) (*fakeSystem, string) {
		return newFakeSystem(), filepath.Join(t.TempDir(), "ProgramData", "winpool")
	}
	dacls := func(sys *fakeSystem) []string {
		return slices.DeleteFunc(slices.Clone(sys.calls), func(c string) bool { return !strings.HasPrefix(c, "dacl ") })
	}

	sys, root := fresh(t)
	if err := secureStateDir(sys, root); err != nil {
		t.Fatal(err)
	}
	if n := len(dacls(sys)); n != 1+len(stateSubfolders) {
		t.Errorf("%d folders given the DACL, want %d: %q", n, 1+len(stateSubfolders), sys.calls)
	}

	sys, root = fresh(t)
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	sys.security[root] = EntrySecurity{OwnerSID: sidSystem, ACEs: []ACE{{Type: ACEAllow, Mask: 0x1f01ff, SID: sidSystem}, {Type: ACEAllow, Mask: 0x116, SID: "S-1-5-32-545"}}}
	sys.security[filepath.Join(root, "logs")] = sys.security[root]
	if err := secureStateDir(sys, root); err != nil {
		t.Errorf("an older agent's folder: %v", err)
	}
	if s := sys.security[root]; !s.Protected || len(s.ACEs) != 2 {
		t.Errorf("an older agent's folder keeps %+v", s)
	}

	sys, root = fresh(t)
	os.MkdirAll(root, 0o755)
	err := secureStateDir(sys, root)
	if err == nil || !strings.Contains(err.Error(), root+" is owned by "+sys.ownerOfOthers) {
		t.Errorf("a squatted folder: %v", err)
	}
	if d := dacls(sys); len(d) != 0 {
		t.Errorf("DACLs set on a squatted folder: %q", d)
	}

	sys, root = fresh(t)
	os.MkdirAll(root, 0o755)
	sys.security[root] = agentsOwn
	elsewhere := filepath.Join(filepath.Dir(root), "elsewhere")
	os.MkdirAll(elsewhere, 0o755)
	if err := os.Symlink(elsewhere, filepath.Join(root, "runtime")); err != nil {
		t.Fatal(err)
	}
	err = secureStateDir(sys, root)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(root, "runtime")+" is a symbolic link") {
		t.Errorf("a link for a sub-folder: %v", err)
	}
	if d := dacls(sys); len(d) != 0 {
		t.Errorf("DACLs set with a link in the tree: %q", d)
	}
}

// The containerd the agent runs as SYSTEM is the one the host's service
// runs (AKS: NSSM's Application), or the installer's folder; never a
// containerd.exe found on PATH.
func TestTheContainerdRunIsTheServicesNeverOneOnPath(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // a containerd.exe there must not matter
	none := func(string) bool { return false }
	sys := newFakeSystem()
	if got := containerdProgram(sys, `D:\containerd.exe`, "", none); got != `D:\containerd.exe` {
		t.Errorf("configured: %q", got)
	}
	if got := containerdProgram(sys, "", "", none); got != "" {
		t.Errorf("no service, nothing installed: %q", got)
	}
	installed := func(p string) bool { return p == `C:\Program Files\containerd\containerd.exe` }
	if got := containerdProgram(sys, "", "", installed); got != `C:\Program Files\containerd\containerd.exe` {
		t.Errorf("the installer's folder: %q", got)
	}
	sys.services["containerd"] = &fakeService{imagePath: `C:\k\nssm.exe`, states: []ServiceStatus{status(ServiceRunning)}}
	sys.registry[`SYSTEM\CurrentControlSet\Services\containerd\Parameters\Application`] = fakeValue{s: `C:\Program Files\containerd\bin\containerd.exe`}
	if got := containerdProgram(sys, "", "", installed); got != `C:\Program Files\containerd\bin\containerd.exe` {
		t.Errorf("the service's program (AKS, under NSSM): %q", got)
	}
}
