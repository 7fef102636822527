package fleet

import (
	"io"
	"strings"
	"testing"
	"time"

	"winpool.dev/agent/internal/host"
)

func TestDefaults(t *testing.T) {
	s, err := ParseSettings(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.Nodes != 3 || s.NamePrefix != "win-" || s.OS != "ltsc2022" || s.Build.String() != "10.0.20348.2700" ||
		s.Containerd != "1.7.20" || s.ContainerdSuffix != "" || s.ApplyTime != 5*time.Second ||
		s.RebootTime != time.Second || s.AgentNamespace != "winpool-agents" || !s.Create || s.CreateOnly ||
		s.HNS != HNSAuto || s.HNSSync != 2*time.Second || s.HNSInterval != time.Second || s.Seed != 1 || s.FailRate != 0 || s.JSONLogs {
		t.Errorf("defaults: %+v", s)
	}
}

func TestFlags(t *testing.T) {
	s, err := ParseSettings(strings.Fields(
		"--nodes=7 --name-prefix w19- --labels pool=a,team=x --os ltsc2019 --build 10.0.17763.6293 "+
			"--containerd 1.7.20+azure --apply-time 0.5s --reboot-time 0s --fail-rate 0.25 --seed 9 "+
			"--fail-nodes w19-1,w19-3 --agent-namespace agents --no-create --hns 12,340 --hns-sync-time 1.5s --hns-interval 15s --log-format json"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{
		Nodes: 7, NamePrefix: "w19-", Labels: map[string]string{"pool": "a", "team": "x"}, OS: "ltsc2019",
		Build: host.Build{Major: 10, Build: 17763, UBR: 6293}, Containerd: "1.7.20", ContainerdSuffix: "+azure",
		CNIMode: "overlay", ApplyTime: 500 * time.Millisecond, FailRate: 0.25, Seed: 9,
		FailNodes: map[string]bool{"w19-1": true, "w19-3": true}, AgentNamespace: "agents",
		HNS: HNSFixed, HNSFixed: host.HNSCounts{LoadBalancers: 12, RemoteEndpoints: 340},
		HNSSync: 1500 * time.Millisecond, HNSInterval: 15 * time.Second, JSONLogs: true,
	}
	if s.Nodes != want.Nodes || s.NamePrefix != want.NamePrefix || len(s.Labels) != 2 || s.Labels["team"] != "x" ||
		s.Build != want.Build || s.Containerd != want.Containerd || s.ContainerdSuffix != want.ContainerdSuffix ||
		s.ApplyTime != want.ApplyTime || s.RebootTime != 0 || s.FailRate != want.FailRate || s.Seed != want.Seed ||
		!s.FailNodes["w19-1"] || !s.FailNodes["w19-3"] || len(s.FailNodes) != 2 || s.AgentNamespace != want.AgentNamespace ||
		s.Create || s.HNS != want.HNS || s.HNSFixed != want.HNSFixed || s.HNSSync != want.HNSSync || s.HNSInterval != want.HNSInterval || !s.JSONLogs {
		t.Errorf("got %+v\nwant %+v", s, want)
	}
	if s.CatchUp(s.Build) != 3*s.HNSSync {
		t.Errorf("ltsc2019 catches up in %v, want three times %v", s.CatchUp(s.Build), s.HNSSync)
	}
	if s, _ := ParseSettings([]string{"--hns", "off"}, io.Discard); s.HNS != HNSOff {
		t.Errorf("--hns off: %v", s.HNS)
	}
}

// Bad input is refused with the flag's name and what it wants.
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--os ltsc2019 --build 10.0.20348.2700", "--build 10.0.20348.2700 is not a build of ltsc2019: ltsc2019 builds are 10.0.17763.<revision>"},
		{"--os ltsc2016", `--os must be ltsc2019, ltsc2022 or ltsc2025, got "ltsc2016"`},
		{"--build 10.0.20348", "not a Windows build"},
		{"--containerd 1.7", `"1.7" is not a containerd version`},
		{"--containerd 1.7.20+", "not a containerd version"},
		{"--labels pool", `--labels: "pool" is not key=value`},
		{"--labels bad/key/x=1", "label key"},
		{"--hns 12", "--hns must be auto, off or LB,ENDPOINTS"},
		{"--hns -1,2", "two whole numbers"},
		{"--fail-rate 1.5", "--fail-rate must be between 0 and 1"},
		{"--reboot-time -1s", "--reboot-time must not be negative"},
		{"--apply-time 5", "invalid value \"5\" for flag -apply-time"},
		{"--hns-interval 0s", "--hns-interval must be positive"},
		{"--nodes -1", "--nodes must not be negative"},
		{"--name-prefix Win_", "--name-prefix"},
		{"--no-create --create-only", "do nothing"},
		{"--log-format yaml", "--log-format must be text or json"},
		{"--cni nat", "--cni must be overlay or l2bridge"},
		{"extra", `unexpected argument "extra"`},
	} {
		_, err := ParseSettings(strings.Fields(tc.args), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// Tests give every fleet their own label space and add a pool's labels with a
// second --labels: both must reach the nodes.
func TestLabelsAccumulateOverRepeatedFlags(t *testing.T) {
	s, err := ParseSettings([]string{"--labels=winpool-test=abc", "--labels", "k1=v1,k2=v2", "--labels=k1=later"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"winpool-test": "abc", "k1": "later", "k2": "v2"}
	if len(s.Labels) != len(want) {
		t.Fatalf("labels %v, want %v", s.Labels, want)
	}
	for k, v := range want {
		if s.Labels[k] != v {
			t.Errorf("label %s=%q, want %q (all: %v)", k, s.Labels[k], v, s.Labels)
		}
	}
}
