package fleet

import (
	"os"
	"strings"
	"time"

	"winpool.dev/agent/internal/host"
)

// wsusApproval is the simulated WSUS of --wsus-approved-file: the build its
// administrator approved and when it was published, read from the file at
// every ask (nil without a file; not ok while the file is missing or does
// not read as "<build> <RFC 3339 time>").
func wsusApproval(path string) func() (host.Build, time.Time, bool) {
	if path == "" {
		return nil
	}
	return func() (host.Build, time.Time, bool) {
		return readApproval(path)
	}
}

func readApproval(path string) (host.Build, time.Time, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return host.Build{}, time.Time{}, false
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return host.Build{}, time.Time{}, false
	}
	b, err := host.ParseBuild(fields[0])
	if err != nil {
		return host.Build{}, time.Time{}, false
	}
	published, err := time.Parse(time.RFC3339, fields[1])
	if err != nil {
		return host.Build{}, time.Time{}, false
	}
	return b, published, true
}
