package agent

import corev1 "k8s.io/api/core/v1"

// nodeView is the agent's picture of its Node, as its watch last delivered
// it. The agent never writes the Node, so nothing newer than the watch's
// copy can be known.
type nodeView struct{ watched *corev1.Node }

func (v *nodeView) current() *corev1.Node { return v.watched }

func (v *nodeView) setWatched(n *corev1.Node) { v.watched = n }
