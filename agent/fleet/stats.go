package fleet

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// logStats logs, every interval, what running the fleet costs: resident
// memory and goroutines against the number of agents running.
func (f *Fleet) logStats(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		f.log.Info("fleet stats",
			"agents", f.running.Load(),
			"nodes", f.nodes.len(),
			"rebooting", f.rebooting.Load(),
			"tokenFailures", f.tokenFailures.Load(),
			"rssMiB", rssKiB()/1024,
			"heapMiB", ms.HeapAlloc>>20,
			"goroutines", runtime.NumGoroutine())
	}
}

// rssKiB is VmRSS from /proc/self/status (0 where there is none).
func rssKiB() int64 {
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
