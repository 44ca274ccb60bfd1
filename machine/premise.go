package machine

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/celld/celld-operator/events"
)

// Check confirms the premise on fresh objects: node is the premise's node as the API server has
// it now (nil when it does not exist), pods the fleet's member Pods by name. The error wraps
// ErrPremiseChanged and says what changed.
func (p *Premise) Check(node *corev1.Node, pods map[string]*corev1.Pod) error {
	if p == nil {
		return nil
	}
	if p.Node != "" {
		switch {
		case p.NodeGone && node != nil:
			return fmt.Errorf("node %s exists again: %w", p.Node, ErrPremiseChanged)
		case !p.NodeGone && node == nil:
			// Gone is worse than unreachable: the member can come back even less.
		case !p.NodeGone:
			h := events.NodeHealth(node)
			if h.Ready {
				return fmt.Errorf("node %s is ready again: %w", p.Node, ErrPremiseChanged)
			}
			if h.UnhealthySince.After(p.NodeUnhealthySince) {
				return fmt.Errorf("node %s recovered and failed again since the decision: %w", p.Node, ErrPremiseChanged)
			}
		}
	}
	for _, name := range p.Ready {
		pod := pods[name]
		if pod == nil || !events.PodReady(pod) {
			return fmt.Errorf("member %s is no longer ready: %w", name, ErrPremiseChanged)
		}
	}
	return nil
}
