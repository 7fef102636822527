package fleet

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An agent reaches the API server as a real one does (apiserver.Choose):
// through the kubelet's endpoint when the node has a kubelet kubeconfig, so
// the kubernetes Service's ClusterIP that slow-api keeps down after a boot
// does not stop it; without one, through the Service, which then refuses.
func TestTheServiceRouteIsDownAfterABootButTheKubeletsEndpointIsNot(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"win-0"}}`)
	}))
	defer srv.Close()
	kubeconfig, err := writeKubeletKubeconfig(t.TempDir(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	token := func() string { return "t" }
	for _, tc := range []struct {
		name       string
		kubeconfig string
		serviceUp  bool
		refused    bool
	}{
		{"kubelet kubeconfig, Service down", kubeconfig, false, false},
		{"no kubelet kubeconfig, Service down", "", false, true},
		{"no kubelet kubeconfig, Service up", "", true, false},
	} {
		c := &agentClients{host: srv.URL, base: srv.Client().Transport, kubeletKubeconfig: tc.kubeconfig}
		client, err := c.forToken(agentIdentity{node: "win-0", token: token, saDir: t.TempDir(), serviceUp: func() bool { return tc.serviceUp }})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, err = client.CoreV1().Nodes().Get(context.Background(), "win-0", metav1.GetOptions{})
		if refused := err != nil && strings.Contains(err.Error(), "no HNS load balancer for the kubernetes Service"); refused != tc.refused || (err != nil && !refused) {
			t.Errorf("%s: err %v, want refused %v", tc.name, err, tc.refused)
		}
	}
}

// An agent on a machine whose environment names the kubelet's kubeconfig and
// a proxy (host-env) still talks to the API server as its pod, directly: the
// fleet builds its client with the agent's own choice (apiserver.Config) and
// sends what that chose.
func TestAnAgentIgnoresTheMachinesKubeconfigAndProxy(t *testing.T) {
	var seen []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"win-0"}}`)
	}))
	defer srv.Close()
	kubelet := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(kubelet, srv.URL, hostEnvToken); err != nil {
		t.Fatal(err)
	}
	machine := map[string]string{"KUBECONFIG": kubelet, "HTTPS_PROXY": hostEnvProxy, "HTTP_PROXY": hostEnvProxy}
	c := &agentClients{host: srv.URL, base: srv.Client().Transport}
	client, err := c.forToken(agentIdentity{node: "win-0", token: func() string { return "pod-token" }, saDir: t.TempDir(),
		serviceUp: func() bool { return true }, machineEnv: func(k string) string { return machine[k] }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Get(context.Background(), "win-0", metav1.GetOptions{}); err != nil {
		t.Fatalf("the agent's request: %v", err)
	}
	if len(seen) != 1 || seen[0] != "Bearer pod-token" {
		t.Errorf("the API server saw %q, want the pod's token alone", seen)
	}
}
