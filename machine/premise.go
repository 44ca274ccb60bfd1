package machine

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
)

// Check confirms the premise on fresh reads. The error wraps ErrPremiseChanged and says what
// changed.
func (p *Premise) Check(fresh Fresh) error {
	if p == nil {
		return nil
	}
	if p.FleetGeneration != 0 && fresh.FleetGeneration != p.FleetGeneration {
		return fmt.Errorf("the fleet's spec changed since the decision (generation %d, decided on %d): %w",
			fresh.FleetGeneration, p.FleetGeneration, ErrPremiseChanged)
	}
	if p.Workload {
		switch {
		case !p.WorkloadExists && fresh.WorkloadExists:
			return fmt.Errorf("the workload exists (generation %d) though the decision saw none: %w", fresh.WorkloadGeneration, ErrPremiseChanged)
		case p.WorkloadExists && !fresh.WorkloadExists:
			return fmt.Errorf("the workload is gone since the decision: %w", ErrPremiseChanged)
		case p.WorkloadExists && fresh.WorkloadGeneration != p.WorkloadGeneration:
			return fmt.Errorf("the workload's spec changed since the decision (generation %d, decided on %d): %w",
				fresh.WorkloadGeneration, p.WorkloadGeneration, ErrPremiseChanged)
		case p.RolledOut && !fresh.WorkloadRolledOut:
			return fmt.Errorf("the workload's last change has not rolled out by its status: %w", ErrPremiseChanged)
		}
	}
	if p.Node != "" {
		node := fresh.Node
		switch {
		case p.NodeGone && node != nil:
			return fmt.Errorf("node %s exists again: %w", p.Node, ErrPremiseChanged)
		case !p.NodeGone && node == nil:
			// Gone is worse than unreachable: the member can come back even less.
		case !p.NodeGone:
			h := events.NodeHealth(node)
			if p.NodeFenced && !h.Fenced {
				return fmt.Errorf("node %s is no longer fenced (the %s taint is gone): %w", p.Node, corev1.TaintNodeOutOfService, ErrPremiseChanged)
			}
			if h.Ready {
				return fmt.Errorf("node %s is ready again: %w", p.Node, ErrPremiseChanged)
			}
			if h.UnhealthySince.After(p.NodeUnhealthySince) {
				return fmt.Errorf("node %s recovered and failed again since the decision: %w", p.Node, ErrPremiseChanged)
			}
		}
	}
	if p.OnlyNotReady != "" {
		for name, pod := range fresh.Pods {
			if name == p.OnlyNotReady {
				continue
			}
			if !events.PodReady(pod) {
				return fmt.Errorf("member %s is not ready: %w", name, ErrPremiseChanged)
			}
			if err := nodeServes(pod, fresh); err != nil {
				return err
			}
		}
	}
	if p.NoMembers && fresh.Members > 0 {
		return fmt.Errorf("%d member Pods exist: %w", fresh.Members, ErrPremiseChanged)
	}
	if p.DiskOf != "" {
		switch c := fresh.Disk; {
		case c == nil:
			// Gone already: the delete finds nothing, which is what it wanted.
		case c.UID != p.DiskUID:
			return fmt.Errorf("claim %s was replaced since the decision (uid %s, decided on %s): %w", c.Name, c.UID, p.DiskUID, ErrPremiseChanged)
		case types.UID(c.Labels[kinds.LabelFleetUID]) != p.DiskOf:
			return fmt.Errorf("claim %s is no longer labelled %s=%s: %w", c.Name, kinds.LabelFleetUID, p.DiskOf, ErrPremiseChanged)
		}
	}
	if p.DiskBelow != nil {
		switch c := fresh.Disk; {
		case c == nil:
			return fmt.Errorf("the claim to grow is gone: %w", ErrPremiseChanged)
		case c.DeletionTimestamp != nil:
			return fmt.Errorf("claim %s is being deleted: %w", c.Name, ErrPremiseChanged)
		default:
			if q := c.Spec.Resources.Requests[corev1.ResourceStorage]; q.Cmp(*p.DiskBelow) >= 0 {
				return fmt.Errorf("claim %s asks for %s already, at least the %s decided on: it is never shrunk: %w", c.Name, q.String(), p.DiskBelow.String(), ErrPremiseChanged)
			}
		}
	}
	if p.Claim != "" {
		if c := fresh.Claim; c != nil && c.DeletionTimestamp == nil && c.Status.Phase != corev1.ClaimLost {
			return fmt.Errorf("claim %s exists and is not lost: %w", p.Claim, ErrPremiseChanged)
		}
	}
	for _, name := range p.Ready {
		pod := fresh.Pods[name]
		if pod == nil || !events.PodReady(pod) {
			return fmt.Errorf("member %s is no longer ready: %w", name, ErrPremiseChanged)
		}
		if err := nodeServes(pod, fresh); err != nil {
			return err
		}
		if n := fresh.MemberNodes[pod.Spec.NodeName]; p.Uncordoned && n != nil && n.Spec.Unschedulable {
			return fmt.Errorf("member %s's node %s is cordoned: a drain may evict it: %w", name, n.Name, ErrPremiseChanged)
		}
	}
	return nil
}

// nodeServes confirms that a ready member's node is ready too: its Pod says Ready until the node
// lifecycle controller catches up with a node that stopped answering.
func nodeServes(pod *corev1.Pod, fresh Fresh) error {
	name := pod.Spec.NodeName
	if name == "" {
		return nil
	}
	n, read := fresh.MemberNodes[name]
	switch {
	case !read:
		return fmt.Errorf("member %s's node %s was not read: %w", pod.Name, name, ErrPremiseChanged)
	case n == nil:
		return fmt.Errorf("member %s's node %s is gone: %w", pod.Name, name, ErrPremiseChanged)
	case !events.NodeHealth(n).Ready:
		return fmt.Errorf("member %s's node %s is not ready: %w", pod.Name, name, ErrPremiseChanged)
	}
	return nil
}
