//go:build tools

// Package tools pins the etcd server. go.etcd.io/etcd/server/v3 replaces its
// sibling modules with relative paths, so it is built from this module instead.
package tools

import _ "go.etcd.io/etcd/server/v3"
