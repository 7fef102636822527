package main

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"winpool.dev/agent/internal/apiserver"
)

// serviceAccountDir is where the kubelet mounts the pod's token and CA.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// env is the part of the environment restConfig reads (os.Getenv in main).
type env func(string) string

// restConfig is KUBECONFIG when set, else the pod's own identity: its
// ServiceAccount token (a file client-go re-reads as the kubelet rotates it)
// and the cluster CA, with the API server apiserver.Choose picks (the
// kubelet's endpoint before the kubernetes Service).
//
// A HostProcess container on containerd before 1.7 sees its volumes under
// %CONTAINER_SANDBOX_MOUNT_POINT% rather than at their paths; the token is
// looked for there too.
func restConfig(getenv env) (*rest.Config, error) {
	if path := getenv("KUBECONFIG"); path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, err
		}
		if s := getenv("WINPOOL_API_SERVER"); s != "" {
			cfg.Host = apiserver.URL(s)
		}
		return cfg, nil
	}
	dir := serviceAccountDir
	if _, err := os.Stat(filepath.Join(dir, "token")); err != nil {
		if root := getenv("CONTAINER_SANDBOX_MOUNT_POINT"); root != "" {
			dir = filepath.Join(root, filepath.FromSlash(serviceAccountDir))
		}
	}
	token, ca := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	if _, err := os.Stat(token); err != nil {
		return nil, fmt.Errorf("no ServiceAccount token at %s (is automountServiceAccountToken off?): %w", token, err)
	}
	ep, err := apiserver.Choose(getenv, os.ReadFile)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            ep.Host,
		BearerTokenFile: token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: ca, ServerName: ep.ServerName},
	}, nil
}
