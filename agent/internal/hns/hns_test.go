package hns

import (
	"errors"
	"strings"
	"testing"

	"winpool.dev/agent/internal/host"
)

func TestSelect(t *testing.T) {
	nat := Network{ID: "n0", Name: "nat", Type: "NAT"}
	ext := Network{ID: "n1", Name: "ext", Type: "L2Bridge"}
	external := Network{ID: "n2", Name: "External", Type: "L2Bridge"}
	for _, tc := range []struct {
		name       string
		nets       []Network
		configured string
		wantName   string
		wantMode   string
		wantErr    string
	}{
		{"AKS azure CNI beside its ext helper", []Network{nat, ext, {ID: "a", Name: "azure", Type: "L2Bridge"}}, "", "azure", "l2bridge", ""},
		{"flannel vxlan", []Network{external, {ID: "v", Name: "vxlan0", Type: "Overlay"}}, "", "vxlan0", "overlay", ""},
		{"flannel host-gw", []Network{external, {ID: "c", Name: "cbr0", Type: "L2Bridge"}}, "", "cbr0", "l2bridge", ""},
		{"Calico vxlan beside External", []Network{external, {ID: "k", Name: "Calico", Type: "Overlay"}}, "", "Calico", "overlay", ""},
		{"an unknown name, the only pod network", []Network{nat, ext, {ID: "x", Name: "mynet", Type: "Overlay"}}, "", "mynet", "overlay", ""},
		{"KUBE_NETWORK names it", []Network{{ID: "a", Name: "azure", Type: "L2Bridge"}, {ID: "o", Name: "other", Type: "Overlay"}}, "other", "other", "overlay", ""},
		{"KUBE_NETWORK names one that is not there yet", []Network{{ID: "a", Name: "azure", Type: "L2Bridge"}}, "vxlan0", "", "", ""},
		{"only helpers: no network yet", []Network{nat, ext, external}, "", "", "", ""},
		{"a known name of a non-pod type is not taken", []Network{{ID: "z", Name: "azure", Type: "NAT"}}, "", "", "", ""},
		{"two unknown pod networks: ambiguous, says what to set", []Network{{ID: "1", Name: "a", Type: "Overlay"}, {ID: "2", Name: "b", Type: "L2Bridge"}}, "", "", "",
			`"a" (Overlay), "b" (L2Bridge); set KUBE_NETWORK`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, ok, err := Select(tc.nets, tc.configured)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != (tc.wantName != "") || n.Name != tc.wantName || (ok && Mode(n) != tc.wantMode) {
				t.Errorf("Select = %+v %v (mode %q), want %q mode %q", n, ok, Mode(n), tc.wantName, tc.wantMode)
			}
		})
	}
}

func TestCount(t *testing.T) {
	f := &Fake{
		Nets: []Network{{ID: "e", Name: "ext", Type: "L2Bridge"}, {ID: "v", Name: "vxlan0", Type: "Overlay"}},
		LBs:  42,
		EndpointsByID: map[string][]Endpoint{
			"v": {{Remote: true}, {Remote: false}, {Remote: true}, {Remote: true}},
			"e": {{Remote: true}, {Remote: true}},
		},
	}
	got, err := Count(f, "")
	if want := (host.HNSCounts{LoadBalancers: 42, RemoteEndpoints: 3}); err != nil || got != want {
		t.Errorf("Count = %+v, %v; want %+v (remote endpoints of vxlan0 only, local ones not counted)", got, err, want)
	}

	f.Nets = f.Nets[:1]
	if got, err := Count(f, ""); err != nil || got != (host.HNSCounts{LoadBalancers: 42}) {
		t.Errorf("no kube-proxy network: Count = %+v, %v; want the load balancers and no endpoints", got, err)
	}

	f.Err = errors.New("HNS is not running")
	if _, err := Count(f, ""); err == nil || !strings.Contains(err.Error(), "HNS is not running") {
		t.Errorf("HNS down: err = %v, want it passed on", err)
	}
}
