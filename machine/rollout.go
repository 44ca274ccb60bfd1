package machine

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/render"
)

// Condition reasons of a staged rollout (spec.rollout).
const (
	// ReasonRolloutHeld: a template change updated the canary members and waits for a person to
	// approve its revision.
	ReasonRolloutHeld = "RolloutHeld"
)

// The Events of a staged rollout, one each per revision.
const (
	RolloutHeldEventPrefix     = "event/rollout/held/"
	RolloutApprovedEventPrefix = "event/rollout/approved/"
	RolloutDoneEventPrefix     = "event/rollout/done/"
)

// canary is the number of members a template change updates before it holds; 0 when the fleet
// stages nothing (no spec.rollout, or a workload without a partition).
func canary(f *v1alpha1.CelldFleet) int32 {
	if f.Spec.Rollout == nil || !render.UsesStatefulSet(&f.Spec) {
		return 0
	}
	return max(f.Spec.Rollout.Canary, 0)
}

// approved: the fleet approves the revision the workload rolls out now, as its controller last
// reported it for the latest spec. A status behind the spec may still name the revision approved
// before the change now written: that approval must not carry over to the new revision.
func approved(v *events.View) bool {
	w := &v.Workload
	a := v.Fleet.Annotations[v1alpha1.AnnotationRolloutApproved]
	return a != "" && a == w.UpdateRevision && w.ObservedGeneration >= w.Generation
}

// partition is the StatefulSet's partition for this step at replicas, given the rendered one:
//   - a template change going out with this apply holds at the top canary members;
//   - an approved revision goes through (0);
//   - a rollout in flight keeps its partition, lowered if the size or the canary count now asks
//     for it, never raised: a growth's new top members run the update revision, as the
//     StatefulSet gives any member above the partition, and no canary is moved back;
//   - with nothing in flight, the partition stays as it is (it moves nothing).
//
// A fleet that stages nothing runs at partition 0, as a fleet always did.
func (p *planner) partition(replicas int32, desired *appsv1.StatefulSet) int32 {
	n := canary(p.v.Fleet)
	if n == 0 || desired == nil {
		return 0
	}
	v := p.v
	w := &v.Workload
	hold := max(replicas-n, 0)
	observed := v.Owned.StatefulSet
	switch {
	case !w.Exists || observed == nil || !render.TemplateMatches(desired, observed):
		return hold
	case approved(v):
		return 0
	case w.CurrentRevision != w.UpdateRevision:
		return min(w.Partition, hold)
	}
	return w.Partition
}

// rolloutStatus is the staged rollout in flight, nil when none: the workload's members are not
// all on its update revision. held says it waits for a person (partition is what this step
// sets).
func (p *planner) rolloutStatus() *v1alpha1.RolloutStatus {
	v := p.v
	w := &v.Workload
	if canary(v.Fleet) == 0 || !w.Exists || w.UpdateRevision == "" || (w.CurrentRevision == w.UpdateRevision && w.UpdatedReplicas >= w.Replicas) {
		return nil
	}
	return &v1alpha1.RolloutStatus{
		Revision: w.UpdateRevision, CurrentRevision: w.CurrentRevision,
		Updated: w.UpdatedReplicas, Total: w.Replicas, Partition: w.Partition,
		Held: p.held(),
	}
}

// held: the rollout is settled at its partition and stays there until a person approves it.
// A StatefulSet created anew over members on an earlier template holds them below its partition
// as well (a disk resize creates it again; a spec change may be first to reach the new one).
func (p *planner) held() bool {
	w := &p.v.Workload
	return p.part > 0 && (w.Held() || w.HeldOverOthers()) && p.fx.rolledOut
}

// heldText says what a held rollout waits for and how to end the wait.
func (p *planner) heldText() string {
	v := p.v
	w := &v.Workload
	return fmt.Sprintf("approval of revision %s, on %d of %d members (spec.rollout.canary %d): run kubectl celld rollout approve %s "+
		"(annotation %s=%s) to update the rest one at a time, or revert the spec to roll the canaries back",
		w.UpdateRevision, w.UpdatedReplicas, w.Replicas, canary(v.Fleet), v.Name, v1alpha1.AnnotationRolloutApproved, w.UpdateRevision)
}

// rolloutEvents are the Events of a staged rollout, told with the status that first shows the
// news: held once per revision, approved once, and done once all members run it.
func rolloutEvents(st, published *v1alpha1.CelldFleetStatus, name string) []Action {
	cur, old := st.Rollout, published.Rollout
	var out []Action
	switch {
	case cur != nil && cur.Held && (old == nil || !old.Held || old.Revision != cur.Revision):
		out = append(out, Action{Kind: RecordEvent, Key: RolloutHeldEventPrefix + cur.Revision, EventType: "Normal", Reason: "RolloutHeld",
			Message: fmt.Sprintf("rollout of revision %s held on %d of %d members: approve it with kubectl celld rollout approve %s, or revert the spec",
				cur.Revision, cur.Updated, cur.Total, name)})
	case cur != nil && !cur.Held && old != nil && old.Held && old.Revision == cur.Revision:
		out = append(out, Action{Kind: RecordEvent, Key: RolloutApprovedEventPrefix + cur.Revision, EventType: "Normal", Reason: "RolloutApproved",
			Message: fmt.Sprintf("rollout of revision %s approved: the other %d members update one at a time", cur.Revision, cur.Total-cur.Updated)})
	case cur == nil && old != nil:
		out = append(out, Action{Kind: RecordEvent, Key: RolloutDoneEventPrefix + old.Revision, EventType: "Normal", Reason: "RolloutComplete",
			Message: "every member runs the workload's current revision"})
	}
	return out
}

// rolloutEqual compares two rollout statuses.
func rolloutEqual(a, b *v1alpha1.RolloutStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
