package agent

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// nodeView is the agent's picture of its Node: the watched object, except
// right after the agent's own write, when the write's response is newer than
// anything the watch has delivered yet. Deciding from the older watched copy
// would read the agent's report as missing, take a continuation for a fresh
// request and reset the host's counters.
type nodeView struct {
	watched *corev1.Node
	// written is the response to the agent's last write, until the watch
	// delivers a Node at least that new; wrote is what those writes set.
	written *corev1.Node
	wrote   map[string]*string
}

func (v *nodeView) current() *corev1.Node {
	if v.written != nil {
		return v.written
	}
	return v.watched
}

func (v *nodeView) setWatched(n *corev1.Node) {
	v.watched = n
	if v.written != nil && (n == nil || v.caughtUp(n)) {
		v.written, v.wrote = nil, nil
	}
}

func (v *nodeView) setWritten(n *corev1.Node, changes map[string]*string) {
	if n.ManagedFields != nil {
		// A shallow copy: the response may be shared with its sender.
		c := *n
		c.ManagedFields = nil
		n = &c
	}
	if v.wrote == nil {
		v.wrote = map[string]*string{}
	}
	for k, val := range changes {
		v.wrote[k] = val
	}
	v.written = n
}

// caughtUp: n is at least as new as the agent's last write. Resource versions
// are compared as numbers when both are (as every etcd-backed API server
// makes them); otherwise n must show every value the agent wrote.
func (v *nodeView) caughtUp(n *corev1.Node) bool {
	got, err1 := strconv.ParseUint(n.ResourceVersion, 10, 64)
	wrote, err2 := strconv.ParseUint(v.written.ResourceVersion, 10, 64)
	if err1 == nil && err2 == nil {
		return got >= wrote
	}
	for k, want := range v.wrote {
		have, ok := n.Annotations[k]
		if want == nil && ok || want != nil && (!ok || have != *want) {
			return false
		}
	}
	return true
}
