//go:build windows

package windows

import (
	"context"
	"time"

	"github.com/Microsoft/go-winio"
)

// csiProxyPipesWait bounds the pipe check of one Observe: CSI Proxy creates
// its pipes at start and answers at once, and a pipe that does not exist
// fails the dial at once; only a busy pipe is waited for.
const csiProxyPipesWait = 2 * time.Second

// csiProxyPipesAnswer: one of CSI Proxy's named pipes accepts a connection,
// which is what a CSI node plugin needs of it, whatever the service manager
// says of the service.
func csiProxyPipesAnswer(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, csiProxyPipesWait)
	defer cancel()
	for _, pipe := range csiProxyPipes() {
		// Closed at once: CSI Proxy's gRPC server drops a connection that
		// ends before its HTTP/2 preface, logging it at most at info level,
		// which gRPC's default logger discards (no log spam per Observe).
		if c, err := winio.DialPipeContext(ctx, pipe); err == nil {
			c.Close()
			return true
		}
		if ctx.Err() != nil {
			return false
		}
	}
	return false
}
