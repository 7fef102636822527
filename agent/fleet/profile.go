package fleet

import (
	"embed"
	"fmt"
	"path"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"winpool.dev/agent/internal/hns"
	"winpool.dev/agent/internal/host/fakewin"
)

// Profile is how the simulated machines were built (--host-profile): the
// node image a real pool runs, as data (profiles/<name>.yaml, each citing
// the image's sources): the services named, placed and wrapped the way that
// image installs them, kube-proxy's HNS network named as its CNI names it,
// the registry it sets. A new image is a new file.
type Profile struct {
	Name string `json:"name"`
	// ContainerdSuffix is the vendor metadata the image's containerd
	// reports after its version ("+azure"), used when --containerd gives none.
	ContainerdSuffix string `json:"containerdSuffix,omitempty"`
	// UpstreamContainerd: the image runs upstream containerd, so a vendor
	// suffix in --containerd is a mistake.
	UpstreamContainerd bool `json:"upstreamContainerd,omitempty"`
	// Networks names kube-proxy's network for each CNI mode the image's CNI
	// runs ("overlay", "l2bridge"); an image with one mode runs it whatever
	// --cni says.
	Networks map[string]string `json:"networks"`
	// LocalizedTitles: the update source answers in another language.
	LocalizedTitles bool              `json:"localizedTitles,omitempty"`
	Registry        []fakewin.Value   `json:"registry,omitempty"`
	Services        []fakewin.Service `json:"services"`
}

//go:embed profiles/*.yaml
var profileFiles embed.FS

// ProfileKind is the default image.
const ProfileKind = "kind"

// profiles are the images --host-profile knows, by name.
func profiles() (map[string]Profile, error) {
	entries, err := profileFiles.ReadDir("profiles")
	if err != nil {
		return nil, err
	}
	out := map[string]Profile{}
	for _, e := range entries {
		b, err := profileFiles.ReadFile(path.Join("profiles", e.Name()))
		if err != nil {
			return nil, err
		}
		var p Profile
		if err := yaml.UnmarshalStrict(b, &p); err != nil {
			return nil, fmt.Errorf("profiles/%s: %w", e.Name(), err)
		}
		if p.Name+".yaml" != e.Name() || len(p.Networks) == 0 || len(p.Services) == 0 {
			return nil, fmt.Errorf("profiles/%s: a profile names itself as its file, and has networks and services", e.Name())
		}
		out[p.Name] = p
	}
	return out, nil
}

func parseProfile(s string) (Profile, error) {
	all, err := profiles()
	if err != nil {
		return Profile{}, err
	}
	if p, ok := all[s]; ok {
		return p, nil
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	slices.Sort(names)
	return Profile{}, fmt.Errorf("want one of %s, got %q", strings.Join(names, ", "), s)
}

// containerdSuffix is the vendor metadata the profile's kubelets report
// after the version ("" keeps what --containerd says).
func (p Profile) containerdSuffix(given string) (string, error) {
	switch {
	case given == "":
		return p.ContainerdSuffix, nil
	case p.UpstreamContainerd:
		return "", fmt.Errorf("--host-profile %s runs upstream containerd: drop %q from --containerd", p.Name, given)
	}
	return given, nil
}

// shape builds the image on a machine: its services, registry and update
// source's language, and kube-proxy's network for cni ("overlay",
// "l2bridge"; "": none yet).
// runsKubeProxy: the image runs kube-proxy itself, as a service or a
// service's child; otherwise a HostProcess DaemonSet runs it in a pod
// (sig-windows-tools' kube-proxy, as kind's nodes have it).
func (p Profile) runsKubeProxy() bool {
	for _, s := range p.Services {
		if _, child := s.Children["kube-proxy"]; child || strings.EqualFold(s.Name, "kube-proxy") || strings.EqualFold(s.Name, "kubeproxy") {
			return true
		}
	}
	return false
}

func (p Profile) shape(o *fakewin.Options, cni string) {
	o.Services = append([]fakewin.Service(nil), p.Services...)
	o.Registry = append([]fakewin.Value(nil), p.Registry...)
	o.Catalogue.Localized = p.LocalizedTitles
	o.KubeProxyInPod = !p.runsKubeProxy()
	if cni == "" {
		return
	}
	mode := cni
	if _, ok := p.Networks[cni]; !ok {
		for m := range p.Networks {
			mode = m
		}
	}
	typ := map[string]string{"overlay": "Overlay", "l2bridge": "L2Bridge"}[mode]
	o.Network = hns.Network{Name: p.Networks[mode], Type: typ}
}
