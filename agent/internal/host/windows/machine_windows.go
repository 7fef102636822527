//go:build windows

package windows

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"github.com/Microsoft/go-winio"
	"github.com/Microsoft/hcsshim/hcn"
	ole "github.com/go-ole/go-ole"
	"golang.org/x/sys/windows"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

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
		Net: winNet{}, Box: winBox{}}
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

type winTasks struct{}

// RunTask runs schtasks /Create then /Run. /SC ONCE needs a start time; the
// task is only ever run by /Run. schtasks is not stopped when ctx ends (the
// agent being stopped): killed after /Run had started the task, it would
// report a task that runs as one that never started. commandTimeout still
// bounds a hung schtasks.
func (winTasks) RunTask(ctx context.Context, name, command string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandTimeout)
	defer cancel()
	schtasks := filepath.Join(systemRoot(os.Getenv), "System32", "schtasks.exe")
	create := []string{"/Create", "/F", "/TN", name, "/TR", command, "/SC", "ONCE", "/ST", "00:00", "/RU", "SYSTEM", "/RL", "HIGHEST"}
	for _, args := range [][]string{create, {"/Run", "/TN", name}} {
		out, err := execPrograms{}.Run(ctx, schtasks, args...)
		if err == nil && out.ExitCode != 0 {
			err = fmt.Errorf("exit code %d", out.ExitCode)
		}
		if err != nil {
			return fmt.Errorf("schtasks %s %s: %w (output %q)", args[0], name, err, strings.TrimSpace(string(out.Stdout)+string(out.Stderr)))
		}
	}
	return nil
}

// LastTaskResult reads IRegisteredTask.LastTaskResult through Task
// Scheduler's COM API (Schedule.Service), on a thread of its own: COM
// objects belong to the thread that made them.
func (winTasks) LastTaskResult(name string) (uint32, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := ole.CoInitializeEx(0, ole.COINIT_MULTITHREADED); err != nil {
		if oe, ok := err.(*ole.OleError); !ok || oe.Code() != 1 { // S_FALSE: initialized already
			return 0, fmt.Errorf("initializing COM: %w", err)
		}
	}
	defer ole.CoUninitialize()
	var w wuCalls
	service := w.create("Schedule.Service")
	if service != nil {
		defer service.Release()
	}
	w.call(service, "Connect")
	task := w.call(w.call(service, "GetFolder", `\`), "GetTask", name)
	code := w.int(task, "LastTaskResult")
	if w.err != nil {
		return 0, w.wrap("reading task " + name + "'s last result")
	}
	return uint32(code), nil
}

type winNet struct{}

func (winNet) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func (winNet) HTTP() *http.Client { return preflightClient() }

func (winNet) WinHTTPProxy() (WinHTTPProxyConfig, error) { return readWinHTTPProxy() }

// PipeAnswers closes the connection at once: CSI Proxy's gRPC server drops
// a connection that ends before its HTTP/2 preface, logging it at most at
// info level, which gRPC's default logger discards (no log spam per Observe).
func (winNet) PipeAnswers(ctx context.Context, pipe string) bool {
	c, err := winio.DialPipeContext(ctx, pipe)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// CRIVersion asks over CRI (RuntimeService.Version), as the kubelet does:
// an answer means the runtime itself serves, not only the service (or NSSM)
// that started it.
func (winNet) CRIVersion(ctx context.Context, pipe string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, criTimeout)
	defer cancel()
	// The pipe is dialled by the dialer; the target only has to parse, and
	// the authority must be a valid host name, which a pipe path is not.
	conn, err := grpc.NewClient("passthrough:///containerd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return winio.DialPipeContext(ctx, pipe)
		}))
	if err != nil {
		return "", fmt.Errorf("CRI client for %s: %w", pipe, err)
	}
	defer conn.Close()
	resp, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return "", fmt.Errorf("CRI Version on %s: %w", pipe, err)
	}
	return resp.RuntimeVersion, nil
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

func (hcnAPI) LoadBalancers() (int, error) {
	lbs, err := hcn.ListLoadBalancers()
	return len(lbs), err
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
