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
	return r, nil
}
