package windows

import (
	"context"
	"time"
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
		if n.PipeAnswers(ctx, pipe) {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
	}
	return false
}
