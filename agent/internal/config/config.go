// Package config reads a revision's configuration, as the operator writes it
// into the ConfigMap winpool-<pool>-<revision> (key config.json).
package config

import (
	"encoding/json"
	"fmt"
)

// Revision is the node-level configuration of one revision of a pool. Field
// names match the operator's serialization (src/revision.rs NodeConfig).
type Revision struct {
	Revision        string  `json:"revision"`
	Pool            string  `json:"pool"`
	OSBuild         int     `json:"osBuild"`
	PatchLevel      string  `json:"patchLevel"`
	RuntimeName     string  `json:"runtimeName"`
	RuntimeVersion  *string `json:"runtimeVersion"`
	CNIMode         string  `json:"cniMode"`
	KubeProxyMode   string  `json:"kubeProxyMode"`
	EnableDSR       bool    `json:"enableDsr"`
	CSIProxyVersion *string `json:"csiProxyVersion"`
	// Updates says where the update to PatchLevel comes from; nil means
	// Windows Update (or WSUS), as the node is configured.
	Updates *Updates `json:"updates,omitempty"`
	// RuntimeArchive is the containerd release to install; nil means the
	// official release of RuntimeVersion, checked against its published
	// .sha256sum.
	RuntimeArchive *Archive `json:"runtimeArchive,omitempty"`
	// RuntimeUpgrade is the pool's spec.runtime.upgrade: RuntimeInPlace,
	// RuntimeVerifyOnly, or "" (VerifyOnly where the node image owns
	// containerd: a vendor build or a service wrapper).
	RuntimeUpgrade string `json:"runtimeUpgrade,omitempty"`
}

// Parse reads config.json and checks what the agent relies on.
func Parse(data []byte) (Revision, error) {
	var r Revision
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("config.json is not valid JSON: %w", err)
	}
	if r.Revision == "" || r.PatchLevel == "" {
		return r, fmt.Errorf("config.json lacks revision or patchLevel")
	}
	if err := r.Updates.validate(); err != nil {
		return r, fmt.Errorf("config.json: updates: %w", err)
	}
	if r.RuntimeArchive != nil {
		if err := r.RuntimeArchive.validate(); err != nil {
			return r, fmt.Errorf("config.json: runtimeArchive: %w", err)
		}
	}
	return r, nil
}

// UpdateSource returns the source in effect: absent updates means Windows Update.
func (r Revision) UpdateSource() UpdateSource {
	if r.Updates == nil {
		return SourceWindowsUpdate
	}
	return r.Updates.Source
}
