package machine

import (
	"fmt"
	"sort"

	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/render"
)

// ReasonDeletionBlocked: the fleet's StatefulSet is at zero replicas and its controller will
// never remove the member it has reached, so the deletion waits for a person.
const ReasonDeletionBlocked = "DeletionBlocked"

// scaleDownBlock is a member the StatefulSet controller will not remove and the member that
// keeps it from doing so.
type scaleDownBlock struct {
	blocked, blocker *events.Member
}

// blockedScaleDown follows the StatefulSet controller's ordered (OrderedReady) scale-down
// (stateful_set_control.go): it removes the highest member first, one at a time, waits for a
// terminating one to go, and removes a member that is not running and ready only when it is
// the lowest one that is unavailable. A member not ready above another that is not ready is
// therefore never removed, and the fleet's deletion, which only stops the workload and waits,
// never ends. The operator deletes no Pod while deleting (only Healing does), so it names the
// member and the step that frees it instead. Ready members above it are removed first, one at a
// time; the block is said already, so one step frees the fleet. Nil when the controller can go
// on by itself.
func blockedScaleDown(v *events.View) *scaleDownBlock {
	if !v.Workload.Exists || v.Workload.Replicas != 0 || !render.UsesStatefulSet(&v.Fleet.Spec) || len(v.Members) < 2 {
		return nil
	}
	ms := make([]*events.Member, 0, len(v.Members))
	for i := range v.Members {
		if v.Members[i].Ordinal < 0 {
			return nil
		}
		ms = append(ms, &v.Members[i])
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Ordinal > ms[j].Ordinal })
	var first *events.Member
	for _, m := range ms {
		if !m.Ready || m.Terminating {
			first = m
		}
	}
	for _, m := range ms {
		switch {
		case m.Terminating:
			return nil
		case m.Ready:
			continue
		case m == first || first.Terminating:
			// It is removed next, or once the lower member, already going, is gone.
			return nil
		}
		return &scaleDownBlock{blocked: m, blocker: first}
	}
	return nil
}

func (b *scaleDownBlock) text(v *events.View) string {
	m := b.blocked
	how := "a graceful delete is enough: it is on no node"
	if m.NodeName != "" {
		how = "a graceful delete is enough: its node " + m.NodeName + " is healthy"
		if healthy, _, _ := nodeHealth(v, m.NodeName); !healthy {
			how = "its node " + m.NodeName + " is not healthy: if the Pod stays terminating, power the machine off and taint the node out-of-service (node.kubernetes.io/out-of-service)"
		}
	}
	return fmt.Sprintf("the StatefulSet controller will not remove member %s: it is not ready, and it removes a member that is not ready only when it is the lowest one, "+
		"but member %s below it is not ready either (OrderedReady scale-down); the operator deletes no Pod while the fleet is being deleted: "+
		"delete it with kubectl delete pod %s -n %s (%s), then the controller goes on with the others",
		m.Name, b.blocker.Name, m.Name, v.Namespace, how)
}
