package machine

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/render"
)

// heldView is a fleet of three with spec.rollout.canary 1 whose StatefulSet holds a rollout at
// partition 2: a-2 runs the update revision, a-0 and a-1 the current one. approve is the
// fleet's rollout-approved annotation; stale leaves the set's status one generation behind its
// spec (its controller has not seen the latest template yet).
func heldView(approve string, stale bool) *events.View {
	f := fleet(v1alpha1.ProfileBucket)
	f.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	f.Spec.Rollout = &v1alpha1.RolloutSpec{Canary: 1}
	if approve != "" {
		f.Annotations = map[string]string{v1alpha1.AnnotationRolloutApproved: approve}
	}
	s := render.Render(f, 3, 3).StatefulSet
	render.SetPartition(s, 2)
	s.UID, s.ResourceVersion, s.Generation = "set-uid", "7", 5
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: 5, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, UpdatedReplicas: 1,
		CurrentReplicas: 2, CurrentRevision: "a-old", UpdateRevision: "a-new"}
	if stale {
		s.Status.ObservedGeneration = 4
	}
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	v := &events.View{Now: now, Namespace: f.Namespace, Name: f.Name, Fleet: f, HasFinalizer: true,
		Reservation: events.ReservationView{Exists: true, Name: render.ReservationName(f.Spec.Bucket), BoundTo: f.UID, BoundName: f.Name, BoundNamespace: f.Namespace},
		Workload:    events.WorkloadOf(s), Owned: events.Owned{StatefulSet: s}}
	for i, rev := range []string{"a-old", "a-old", "a-new"} {
		v.Members = append(v.Members, events.Member{Name: "a-" + string(rune('0'+i)), UID: types.UID("pod-" + rev + string(rune('0'+i))), Ordinal: i, Ready: true,
			Revision: rev, NodeName: "node-" + string(rune('0'+i)), NotReadySince: now.Add(-time.Hour)})
	}
	return v
}

// checkHeldOnCanary: the decision shows heldView's rollout held on its canary (status.rollout on
// a-new, 1 of 3 at partition 2, the blocker saying how to approve, Ready False RolloutHeld, one
// RolloutHeld Event) and leaves the partition where it is.
func checkHeldOnCanary(t *testing.T, name string, held Decision) {
	t.Helper()
	if r := held.Status.Rollout; r == nil || !r.Held || r.Revision != "a-new" || r.Updated != 1 || r.Total != 3 || r.Partition != 2 {
		t.Fatalf("%s: status.rollout %+v, want held at 1 of 3 on a-new, partition 2", name, r)
	}
	if p := partitionApplied(held); p != -1 && p != 2 {
		t.Errorf("%s: partition applied %d, want it left at 2", name, p)
	}
	if !strings.Contains(held.Status.BlockedBy, "kubectl celld rollout approve") {
		t.Errorf("%s: blockedBy %q does not say how to approve", name, held.Status.BlockedBy)
	}
	told := 0
	for _, a := range held.Actions {
		if a.Kind == RecordEvent && a.Reason == "RolloutHeld" {
			told++
		}
	}
	if told != 1 {
		t.Errorf("%s: %d RolloutHeld Events, want 1", name, told)
	}
	for _, c := range held.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady && (c.Status != "False" || c.Reason != ReasonRolloutHeld) {
			t.Errorf("%s: Ready %s %s, want False %s", name, c.Status, c.Reason, ReasonRolloutHeld)
		}
	}
}

// partitionApplied is the partition of the StatefulSet a decision applies, -1 when it applies none.
func partitionApplied(d Decision) int32 {
	for _, a := range d.Actions {
		if s, ok := a.Object.(*appsv1.StatefulSet); ok && a.Kind == Apply {
			return *s.Spec.UpdateStrategy.RollingUpdate.Partition
		}
	}
	return -1
}

// TestHeldRolloutWaitsForItsRevision: a rollout held at its partition is settled there and
// says so (status.rollout held, Ready False RolloutHeld, one RolloutHeld Event) without moving
// the partition; an approval of the update revision, reported for the latest spec, sets it to 0
// and the status stops saying held in the same step; an approval read against a status its
// controller has not updated for the latest spec approves nothing; nor does one naming another
// revision.
func TestHeldRolloutWaitsForItsRevision(t *testing.T) {
	checkHeldOnCanary(t, "held", New().Step(heldView("", false)))

	approved := New().Step(heldView("a-new", false))
	if p := partitionApplied(approved); p != 0 {
		t.Errorf("approved: partition applied %d, want 0", p)
	}
	if r := approved.Status.Rollout; r == nil || r.Held {
		t.Errorf("approved: status.rollout %+v, want one not held", r)
	}

	for name, v := range map[string]*events.View{
		"approved on a stale status":    heldView("a-new", true),
		"another revision approved":     heldView("a-older", false),
		"the current revision approved": heldView("a-old", false),
	} {
		if p := partitionApplied(New().Step(v)); p != -1 && p != 2 {
			t.Errorf("%s: partition applied %d, want it left at 2", name, p)
		}
	}
}

// TestRolledOutAtPartition: a StatefulSet held at its partition has rolled out as far as it goes;
// once reverted (the update revision is the current one again), the members below the partition
// run it already, and only every member on it counts.
func TestRolledOutAtPartition(t *testing.T) {
	w := events.WorkloadOf(heldView("", false).Owned.StatefulSet)
	if !w.RolledOut() || !w.Held() {
		t.Fatalf("held at partition 2 with a-2 updated: rolled out %t, held %t; want both", w.RolledOut(), w.Held())
	}
	w.UpdateRevision = w.CurrentRevision
	w.UpdatedReplicas = 2
	if w.RolledOut() || w.Held() {
		t.Errorf("reverted, the canary not back yet (2 of 3 on the revision): rolled out %t, held %t; want neither", w.RolledOut(), w.Held())
	}
}

// grownDisksView is heldView's fleet as a PersistentFleet whose spec.storage.size grew from its
// claims' 1Gi to 2Gi: the rollout held at the partition, or (allUpdated) every member updated.
func grownDisksView(allUpdated bool) *events.View {
	v := heldView("", false)
	f := v.Fleet
	f.Spec.Profile = v1alpha1.ProfilePersistentFleet
	f.Spec.Workload = ""
	f.Spec.Storage = &v1alpha1.StorageSpec{StorageClassName: "fast", Size: resource.MustParse("1Gi")}
	s := render.Render(f, 3, 3).StatefulSet
	render.SetPartition(s, 2)
	s.UID, s.ResourceVersion, s.Generation, s.Status = "set-uid", "7", 5, v.Owned.StatefulSet.Status
	if allUpdated {
		render.SetPartition(s, 0)
		s.Status.UpdatedReplicas, s.Status.CurrentReplicas, s.Status.CurrentRevision = 3, 3, "a-new"
		for i := range v.Members {
			v.Members[i].Revision = "a-new"
		}
	}
	f.Status.State = v1alpha1.StateSteady
	f.Spec.Storage.Size = resource.MustParse("2Gi")
	v.Owned.StatefulSet, v.Workload = s, events.WorkloadOf(s)
	for i := range v.Members {
		name := "data-" + v.Members[i].Name
		v.Members[i].ClaimName = name
		v.Disks = append(v.Disks, events.Disk{Name: name, UID: types.UID(name), FleetUID: f.UID, Ordinal: i,
			Requested: resource.MustParse("1Gi"), Capacity: resource.MustParse("1Gi")})
	}
	return v
}

// TestHeldRolloutKeepsItsStatefulSet: a PersistentFleet whose disks grow while its rollout holds
// at the partition grows every claim but does not create its StatefulSet again for the new claim
// template (a new StatefulSet takes its update revision for the current one and would never see
// the members below the partition, on the older revision, as rolled out); it says what it waits
// for (the rollout's approval). Once every member runs the update revision, the StatefulSet is created again.
func TestHeldRolloutKeepsItsStatefulSet(t *testing.T) {
	grown := func(allUpdated bool) Decision { return New().Step(grownDisksView(allUpdated)) }
	count := func(d Decision, k ActionKind) int {
		n := 0
		for _, a := range d.Actions {
			if a.Kind == k {
				n++
			}
		}
		return n
	}
	held := grown(false)
	if n := count(held, RecreateWorkload); n != 0 {
		t.Errorf("held rollout: %d StatefulSets created again, want none", n)
	}
	if n := count(held, ResizeDisk); n != 3 {
		t.Errorf("held rollout: %d claims grown, want 3", n)
	}
	if !strings.Contains(held.Status.BlockedBy, "revision a-new") {
		t.Errorf("held rollout: blockedBy %q does not say the rollout it waits for", held.Status.BlockedBy)
	}
	if n := count(grown(true), RecreateWorkload); n != 1 {
		t.Errorf("every member updated: %d StatefulSets created again, want 1", n)
	}
}

// overOthersView is heldView's fleet after its StatefulSet was created anew (a disk resize
// creates it again) with a new template: its controller took the update revision for the current
// one, the canary a-2 runs it, and a-0 and a-1 keep the earlier set's revision, below the
// partition. revs gives the members' revisions; notReady marks one member not ready.
func overOthersView(approve string, revs [3]string, notReady int) *events.View {
	v := heldView(approve, false)
	s := v.Owned.StatefulSet
	s.Status.CurrentRevision, s.Status.CurrentReplicas = "a-new", 1
	if notReady >= 0 {
		s.Status.ReadyReplicas, s.Status.AvailableReplicas = 2, 2
		v.Members[notReady].Ready = false
	}
	for i := range v.Members {
		v.Members[i].Revision = revs[i]
	}
	v.Workload = events.WorkloadOf(s)
	return v
}

// TestHeldOverAnEarlierSetsMembers: a StatefulSet created anew over members of an earlier one
// holds them below its partition, though its status says its current revision is its update
// revision: the fleet shows the rollout held (status.rollout, Ready False RolloutHeld, the Event),
// and an approval of the update revision sets the partition to 0. Not held: the same set with a
// member from the partition up not on the update revision (a revert on its way back), or a member
// not ready.
func TestHeldOverAnEarlierSetsMembers(t *testing.T) {
	over := [3]string{"a-older", "a-older", "a-new"}
	checkHeldOnCanary(t, "held over an earlier set's members", New().Step(overOthersView("", over, -1)))
	if p := partitionApplied(New().Step(overOthersView("a-new", over, -1))); p != 0 {
		t.Errorf("approved: partition applied %d, want 0", p)
	}
	for name, v := range map[string]*events.View{
		"the canary not on the update revision":  overOthersView("", [3]string{"a-new", "a-new", "a-older"}, -1),
		"a member below the partition not ready": overOthersView("", over, 0),
	} {
		if r := New().Step(v).Status.Rollout; r == nil || r.Held {
			t.Errorf("%s: status.rollout %+v, want one on its way, not held", name, r)
		}
	}
}

// TestHeldOverOthersByStatus: what the StatefulSet's status alone says of a set created anew.
func TestHeldOverOthersByStatus(t *testing.T) {
	w := events.WorkloadOf(overOthersView("", [3]string{"a-older", "a-older", "a-new"}, -1).Owned.StatefulSet)
	if !w.HeldOverOthers() || w.Held() || w.RolledOut() {
		t.Fatalf("created anew at partition 2: held over others %t, held %t, rolled out %t; want only the first", w.HeldOverOthers(), w.Held(), w.RolledOut())
	}
	for name, change := range map[string]func(*events.WorkloadView){
		"current revision not the update one": func(w *events.WorkloadView) { w.CurrentRevision = "a-old" },
		"a member not ready":                  func(w *events.WorkloadView) { w.ReadyReplicas = 2 },
		"a member missing":                    func(w *events.WorkloadView) { w.StatusReplicas = 2 },
		"every member updated":                func(w *events.WorkloadView) { w.UpdatedReplicas = 3 },
		"no partition":                        func(w *events.WorkloadView) { w.Partition = 0 },
		"status behind the spec":              func(w *events.WorkloadView) { w.ObservedGeneration = w.Generation - 1 },
	} {
		c := w
		change(&c)
		if c.HeldOverOthers() {
			t.Errorf("%s: held over others, want not", name)
		}
	}
}
