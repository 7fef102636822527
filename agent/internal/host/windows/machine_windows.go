//go:build windows

package windows

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"time"
	"unsafe"

	"github.com/Microsoft/go-winio"
	"github.com/Microsoft/hnslib/hcn"
	ole "github.com/go-ole/go-ole"
	"golang.org/x/sys/windows"

	"winpool.dev/agent/internal/hns"
	"winpool.dev/agent/internal/host"
)

// The real Machine: each method one call into Windows.

func windowsMachine() Machine {
	return Machine{System: winSystem{}, Tasks: winTasks{}, Programs: execPrograms{}, HCN: hcnAPI{},
		WindowsUpdate: func() (WindowsUpdate, func(), error) {
			s, err := openWUA()
			if err != nil {
				return nil, nil, err
			}
			return s, s.Close, nil
		},
		Net: winNet{}, Box: winBox{}, Processes: winProcesses{}}
}

// New returns the Windows node the agent runs on (NewOn).
func New(o Options) (host.Host, error) { return NewOn(windowsMachine(), o) }

// RunContainerdSwap is the containerd upgrade task on this node.
func RunContainerdSwap(ctx context.Context, planFile string) (host.RuntimeUpgrade, error) {
	return RunContainerdSwapOn(ctx, windowsMachine(), planFile)
}

// RunServicing is the servicing task on this node.
func RunServicing(ctx context.Context, planFile string) (host.UpdateTask, error) {
	return RunServicingOn(ctx, windowsMachine(), planFile)
}

// winTasks is Task Scheduler's COM API (Schedule.Service), each call on a
// COM thread of its own (comThread).
type winTasks struct{}

// taskCreateOrUpdate and taskLogonServiceAccount are TASK_CREATION and
// TASK_LOGON_TYPE values: replace a task of that name; run as SYSTEM.
const (
	taskCreateOrUpdate      = 6
	taskLogonServiceAccount = 5
)

func (winTasks) RegisterTask(name, definition string) error {
	return inTaskFolder("registering task "+name, func(w *wuCalls, root *ole.IDispatch) {
		w.call(root, "RegisterTask", name, definition, taskCreateOrUpdate, "SYSTEM", nil, taskLogonServiceAccount)
	})
}

func (winTasks) RunTask(name string) error {
	return inTaskFolder("running task "+name, func(w *wuCalls, root *ole.IDispatch) {
		w.call(w.call(root, "GetTask", name), "Run", nil)
	})
}

func (winTasks) LastTaskResult(name string) (code uint32, err error) {
	err = inTaskFolder("reading task "+name+"'s last result", func(w *wuCalls, root *ole.IDispatch) {
		code = uint32(w.int(w.call(root, "GetTask", name), "LastTaskResult"))
	})
	return code, err
}

// inTaskFolder runs f on Task Scheduler's root folder.
func inTaskFolder(what string, f func(w *wuCalls, root *ole.IDispatch)) error {
	done, err := comThread()
	if err != nil {
		return err
	}
	defer done()
	var w wuCalls
	service := w.create("Schedule.Service")
	if service != nil {
		defer service.Release()
	}
	w.call(service, "Connect")
	f(&w, w.call(service, "GetFolder", `\`))
	if w.err != nil {
		return w.wrap(what)
	}
	return nil
}

type winNet struct{}

func (winNet) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func (winNet) HTTP() *http.Client { return preflightClient() }

func (winNet) WinHTTPProxy() (WinHTTPProxyConfig, error) { return readWinHTTPProxy() }

func (winNet) DialPipe(ctx context.Context, pipe string) (net.Conn, error) {
	return winio.DialPipeContext(ctx, pipe)
}

type winBox struct{}

func (winBox) Now() time.Time                        { return time.Now() }
func (winBox) SinceBoot() time.Duration              { return windows.DurationSinceBoot() }
func (winBox) Executable() (string, error)           { return os.Executable() }
func (winBox) Getenv(k string) string                { return os.Getenv(k) }
func (winBox) Setenv(k, v string) error              { return os.Setenv(k, v) }
func (winBox) Stat(p string) (fs.FileInfo, error)    { return os.Stat(p) }
func (winBox) FreeBytes(drive string) (int64, error) { return diskFreeBytes(drive) }

// ProductVersion reads the binary's version resource ("" when it has none,
// as Go binaries built without one do not).
func (winBox) ProductVersion(path string) string {
	size, err := windows.GetFileVersionInfoSize(path, nil)
	if err != nil || size == 0 {
		return ""
	}
	buf := make([]byte, size)
	if err := windows.GetFileVersionInfo(path, 0, size, unsafe.Pointer(&buf[0])); err != nil {
		return ""
	}
	var fixed *windows.VS_FIXEDFILEINFO
	var n uint32
	if err := windows.VerQueryValue(unsafe.Pointer(&buf[0]), `\`, unsafe.Pointer(&fixed), &n); err != nil || fixed == nil || n == 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d", fixed.ProductVersionMS>>16, fixed.ProductVersionMS&0xffff, fixed.ProductVersionLS>>16)
}

// hcnAPI is hns.API on the real HNS, through the same hcn calls kube-proxy's
// winkernel makes.
type hcnAPI struct{}

var _ hns.API = hcnAPI{}

func (hcnAPI) Networks() ([]hns.Network, error) {
	nets, err := hcn.ListNetworks()
	if err != nil {
		return nil, err
	}
	out := make([]hns.Network, 0, len(nets))
	for _, n := range nets {
		out = append(out, hns.Network{ID: n.Id, Name: n.Name, Type: string(n.Type)})
	}
	return out, nil
}

func (hcnAPI) LoadBalancers() (hns.LoadBalancers, error) {
	lbs, err := hcn.ListLoadBalancers()
	out := hns.LoadBalancers{All: len(lbs)}
	for _, lb := range lbs {
		if lb.Flags&hcn.LoadBalancerFlagsDSR != 0 {
			out.DSR++
		}
	}
	return out, err
}

func (hcnAPI) Endpoints(networkID string) ([]hns.Endpoint, error) {
	eps, err := hcn.ListEndpointsOfNetwork(networkID)
	if err != nil {
		return nil, err
	}
	out := make([]hns.Endpoint, 0, len(eps))
	for _, ep := range eps {
		out = append(out, hns.Endpoint{Remote: ep.Flags&hcn.EndpointFlagsRemoteEndpoint != 0})
	}
	return out, nil
}

// winProcesses is the process table through Toolhelp.
type winProcesses struct{}

func (winProcesses) List() ([]Process, error) {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return nil, fmt.Errorf("CreateToolhelp32Snapshot: %w", err)
	}
	defer windows.CloseHandle(snap)
	var e windows.ProcessEntry32
	e.Size = uint32(unsafe.Sizeof(e))
	var out []Process
	for err = windows.Process32First(snap, &e); err == nil; err = windows.Process32Next(snap, &e) {
		out = append(out, Process{PID: e.ProcessID, ParentPID: e.ParentProcessID, Image: windows.UTF16ToString(e.ExeFile[:])})
	}
	if !errors.Is(err, windows.ERROR_NO_MORE_FILES) {
		return nil, fmt.Errorf("Process32Next: %w", err)
	}
	return out, nil
}

func (winProcesses) Terminate(pid uint32) error {
	h, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, pid)
	if err != nil {
		return fmt.Errorf("OpenProcess(%d): %w", pid, err)
	}
	defer windows.CloseHandle(h)
	if err := windows.TerminateProcess(h, 1); err != nil {
		return fmt.Errorf("TerminateProcess(%d): %w", pid, err)
	}
	return nil
}
