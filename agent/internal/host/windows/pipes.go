package windows

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// csiProxyPipesWait bounds the pipe check of one Observe: CSI Proxy creates
// its pipes at start and answers at once, and a pipe that does not exist
// fails the dial at once; only a busy pipe is waited for.
const csiProxyPipesWait = 2 * time.Second

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

// csiProxyPipesAnswer: one of CSI Proxy's named pipes accepts a connection,
// which is what a CSI node plugin needs of it, whatever the service manager
// says of the service.
func csiProxyPipesAnswer(ctx context.Context, n Net) bool {
	ctx, cancel := context.WithTimeout(ctx, csiProxyPipesWait)
	defer cancel()
	for _, pipe := range csiProxyPipes() {
		if pipeAnswers(ctx, n, pipe) {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
	}
	return false
}

// pipeAnswers: pipe accepts a connection, closed at once: CSI Proxy's gRPC
// server drops a connection that ends before its HTTP/2 preface, logging it
// at most at info level, which gRPC's default logger discards (no log spam
// per Observe).
func pipeAnswers(ctx context.Context, n Net, pipe string) bool {
	c, err := n.DialPipe(ctx, pipe)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// criVersion asks the runtime serving CRI on pipe for its version
// (RuntimeService.Version), as the kubelet does: an answer means the
// runtime itself serves, not only the service (or NSSM) that started it.
func criVersion(ctx context.Context, n Net, pipe string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, criTimeout)
	defer cancel()
	// The pipe is dialled by the dialer; the target only has to parse, and
	// the authority must be a valid host name, which a pipe path is not.
	conn, err := grpc.NewClient("passthrough:///containerd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return n.DialPipe(ctx, pipe) }))
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
