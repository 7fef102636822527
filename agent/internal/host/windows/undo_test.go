package windows

import (
	"context"
	"strings"
	"testing"

	"winpool.dev/agent/internal/host"
)

// dismPackages is DISM /Online /Get-Packages /Format:Table /English as
// Windows Server 2022 prints it, a month after an update: the cumulative
// update before it superseded, the servicing stack beside it.
const dismPackages = "Deployment Image Servicing and Management tool\r\nVersion: 10.0.20348.1\r\n\r\nImage Version: 10.0.20348.2762\r\n\r\nPackages listing:\r\n\r\n" +
	"------------------------------------------------------------------------------ | ------------- | --------------- | ---------------------\r\n" +
	"Package Identity                                                               | State         | Release Type    | Install Time         \r\n" +
	"------------------------------------------------------------------------------ | ------------- | --------------- | ---------------------\r\n" +
	"Microsoft-Windows-FodMetadata-Package~31bf3856ad364e35~amd64~~10.0.20348.1      | Installed     | Feature Pack    | 5/8/2021 11:25 AM    \r\n" +
	"Package_for_RollupFix~31bf3856ad364e35~amd64~~20348.2700.1.14                   | Superseded    | Security Update | 9/11/2024 3:12 AM    \r\n" +
	"Package_for_RollupFix~31bf3856ad364e35~amd64~~20348.2762.1.15                   | Installed     | Security Update | 10/9/2024 2:47 AM    \r\n" +
	"Package_for_ServicingStack_2700~31bf3856ad364e35~amd64~~20348.2700.1.1          | Installed     | Update          | 9/11/2024 3:05 AM    \r\n" +
	"\r\nThe operation completed successfully.\r\n"

type removals struct {
	table   string
	listErr int
	removed []string
	code    int
}

func (r *removals) Packages(context.Context) (string, int, error) { return r.table, r.listErr, nil }
func (r *removals) Remove(_ context.Context, name string) (int, error) {
	r.removed = append(r.removed, name)
	return r.code, nil
}

func buildOf(s string) host.Build {
	b, err := host.ParseBuild(s)
	if err != nil {
		panic(err)
	}
	return b
}

// Only the Installed cumulative update of the build the node runs is
// removed: never a superseded one, never the servicing stack.
func TestTheCumulativeUpdateOfTheRunningBuildIsTheOneRemoved(t *testing.T) {
	r := &removals{table: dismPackages, code: 3010}
	res, err := removeCumulative(context.Background(), r, buildOf("10.0.20348.2762"))
	if err != nil {
		t.Fatal(err)
	}
	const want = "Package_for_RollupFix~31bf3856ad364e35~amd64~~20348.2762.1.15"
	if len(r.removed) != 1 || r.removed[0] != want || res.ExitCode != 3010 || !strings.Contains(res.Detail, want) {
		t.Errorf("removed %v with %+v, want %s alone, 3010", r.removed, res, want)
	}
}

// A build no removable package of which is installed (the image's, or a
// build that only looks like one: 2762 is no prefix of 27620) removes
// nothing and says what DISM lists.
func TestNoPackageOfTheBuildRemovesNothing(t *testing.T) {
	for _, b := range []string{"10.0.20348.2700", "10.0.20348.276", "10.0.20348.27620"} {
		r := &removals{table: dismPackages}
		_, err := removeCumulative(context.Background(), r, buildOf(b))
		if err == nil || len(r.removed) != 0 || !strings.Contains(err.Error(), "20348.2700.1.14 (Superseded)") {
			t.Errorf("%s: removed %v, err %v; want nothing removed and the listing named", b, r.removed, err)
		}
	}
	r := &removals{listErr: 740}
	res, err := removeCumulative(context.Background(), r, buildOf("10.0.20348.2762"))
	if err != nil || res.ExitCode != 740 || len(r.removed) != 0 {
		t.Errorf("a listing that failed: %+v, %v, removed %v; want its exit code and nothing removed", res, err, r.removed)
	}
}
