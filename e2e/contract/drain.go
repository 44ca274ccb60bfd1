package contract

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/kinds"
)

// drainClause names what a drain must hold (SPEC section 7, node maintenance): no eviction takes
// a second member of a fleet away. It is the disruption budget's promise, judged on what the
// API server recorded rather than on the budget's own accounts.
const drainClause = "drain"

// podEvicted judges a member taken away by an eviction, which the operator never sends: within
// its workload's size, every other member must have been Ready and none missing, whether the
// evicted member was Ready or not. A member celld reports not ready is not always away: it may be
// the survivor holding the last copy of a key whose other copy just left.
func (j *judging) podEvicted(p, before *corev1.Pod, r Request) {
	fleet := types.UID(p.Labels[kinds.LabelFleetUID])
	if fleet == "" {
		return // not a member of any fleet: the contract does not speak of it
	}
	j.Explained["Pod: evicted"]++
	if _, deleting := j.fleet(fleet); deleting {
		return
	}
	obj := "Pod " + p.Name + " (" + string(p.UID) + ")"
	ready, notReady := j.members(fleet, p.UID)
	size := int32(len(ready) + len(notReady) + 1)
	for _, w := range j.workloads {
		if w.fleet == fleet {
			size = w.replicas
		}
	}
	away := int(size) - 1 - len(ready)
	j.check(away <= 0, drainClause, obj, "evicted (%s) while %d other member(s) of its fleet were away: %d wanted, ready %v, not ready or terminating %v; a drain takes one member at a time",
		r, away, size, ready, notReady)
}
