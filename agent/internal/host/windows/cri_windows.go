//go:build windows

package windows

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/Microsoft/go-winio"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// containerdPipe is containerd's default address on Windows, where its
	// CRI plugin serves the kubelet too (--container-runtime-endpoint
	// npipe:////./pipe/containerd-containerd).
	containerdPipe = `\\.\pipe\containerd-containerd`
	// criTimeout bounds one CRI call: a containerd that is up answers
	// Version at once, and one that is not fails the dial at once, so
	// only a hung one is waited for.
	criTimeout = 10 * time.Second
)

// criRuntimeVersion asks the container runtime on pipe for its version over
// CRI (RuntimeService.Version), as the kubelet does: an answer means the
// runtime itself serves, not only the service (or NSSM) that started it.
func criRuntimeVersion(ctx context.Context, pipe string) (string, error) {
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
