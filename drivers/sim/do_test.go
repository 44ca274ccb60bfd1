package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/celld/celld-operator/reservation"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// bind reserves the fleet's bucket, to another fleet's UID when other is set.
func bind(c *Cluster, f *v1alpha1.CelldFleet, other bool) error {
	r := &v1alpha1.CelldReservation{ObjectMeta: metav1.ObjectMeta{Name: f.Spec.Bucket.Name, Namespace: f.Namespace},
		Spec:   v1alpha1.CelldReservationSpec{FleetName: f.Name, FleetUID: f.UID, Profile: f.Spec.Profile, Bucket: f.Spec.Bucket},
		Status: v1alpha1.CelldReservationStatus{CapacityHistory: []v1alpha1.CapacityDecision{{Kind: v1alpha1.DecisionGrow}}}}
	if other {
		r.Spec.FleetUID = "uid-other"
	}
	return c.Do(machine.Action{Kind: machine.BindReservation, Key: "bind/" + r.Name, Ref: kinds.Ref{Namespace: f.Namespace}, Object: r})
}

func TestBindReservationIsIdempotentForItsFleetAndRefusesAnother(t *testing.T) {
	c := newCluster(t, 1, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	must(t, bind(c, f, false))
	if h := c.Reservation(ns, "alpha-bucket").Status.CapacityHistory; len(h) != 0 {
		t.Fatalf("create kept status %v; the status subresource drops it", h)
	}
	must(t, bind(c, f, false))
	mustEqual(t, "writes", len(c.Writes()), 1)
	err := bind(c, f, true)
	if !apierrors.IsAlreadyExists(err) || !strings.Contains(err.Error(), string(f.UID)) {
		t.Fatalf("binding to another UID: %v, want AlreadyExists naming the bound UID", err)
	}
}

func decision(kind v1alpha1.DecisionKind, from, to int32, at time.Time) *v1alpha1.CapacityDecision {
	return &v1alpha1.CapacityDecision{Time: metav1.NewTime(at), Kind: kind, From: from, To: to, Source: v1alpha1.SourceManual}
}

func TestAppendHistorySkipsARepeatTrimsAndRetriesConflicts(t *testing.T) {
	c := newCluster(t, 1, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	must(t, bind(c, f, false))
	appendH := func(d *v1alpha1.CapacityDecision) error {
		return c.Do(machine.Action{Kind: machine.AppendHistory, Key: "h", Ref: kinds.Ref{Namespace: ns, Name: "alpha-bucket"}, Decisions: []v1alpha1.CapacityDecision{*d}})
	}
	must(t, appendH(decision(v1alpha1.DecisionScaleInRequested, 3, 1, c.Now())))
	c.Advance(time.Minute)
	// The same decision again, on a later pass: not appended.
	must(t, appendH(decision(v1alpha1.DecisionScaleInRequested, 3, 1, c.Now())))
	mustEqual(t, "history", len(c.Reservation(ns, "alpha-bucket").Status.CapacityHistory), 1)

	for i := int32(100); i > 0; i-- {
		must(t, appendH(decision(v1alpha1.DecisionShrinkOne, i, i-1, c.Now())))
	}
	h := c.Reservation(ns, "alpha-bucket").Status.CapacityHistory
	mustEqual(t, "trimmed length", len(h), reservation.MaxHistory)
	mustEqual(t, "standing request kept", h[0].Kind, v1alpha1.DecisionScaleInRequested)
	mustEqual(t, "newest", h[len(h)-1].To, int32(0))

	c.InjectConflicts(2)
	must(t, appendH(decision(v1alpha1.DecisionGrow, 0, 3, c.Now())))
	reqs := c.Requests()
	mustEqual(t, "retries", reqs[len(reqs)-1].Retries, 2)
	c.InjectConflicts(maxRetries + 1)
	if err := appendH(decision(v1alpha1.DecisionShrinkOne, 3, 2, c.Now())); !apierrors.IsConflict(err) {
		t.Fatalf("after %d conflicts: %v, want Conflict", maxRetries+1, err)
	}
	if err := c.Do(machine.Action{Kind: machine.AppendHistory, Key: "h", Ref: kinds.Ref{Namespace: ns, Name: "nope"},
		Decisions: []v1alpha1.CapacityDecision{*decision(v1alpha1.DecisionGrow, 0, 1, c.Now())}}); !apierrors.IsNotFound(err) {
		t.Fatalf("missing reservation: %v, want NotFound", err)
	}
}

func TestDeletePodChecksPreconditionsAndRecordsTheContract(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	apply(t, c, statefulSet(f, 3, "celld:v1"))
	runFor(c, 3*time.Minute)
	must(t, c.CrashMember(ns, "alpha-0"))
	c.Settle()
	p := c.Pod(ns, "alpha-2")
	del := func(a machine.Action) error {
		a.Kind, a.Key, a.Namespace, a.Name = machine.DeletePod, "heal/"+a.Name, ns, p.Name
		return c.Do(a)
	}
	if err := del(machine.Action{UID: "uid-wrong"}); !apierrors.IsConflict(err) {
		t.Fatalf("wrong UID: %v, want Conflict", err)
	}
	if err := del(machine.Action{UID: p.UID, ResourceVersion: "1"}); !apierrors.IsConflict(err) {
		t.Fatalf("stale resourceVersion: %v, want Conflict", err)
	}
	c.InjectConflicts(1)
	if err := del(machine.Action{UID: p.UID}); !apierrors.IsConflict(err) {
		t.Fatalf("injected conflict: %v, want Conflict", err)
	}
	mustEqual(t, "deletions recorded for refused requests", len(c.PodDeletions()), 0)

	must(t, del(machine.Action{UID: p.UID, ResourceVersion: p.ResourceVersion, Reason: "Test"}))
	d := c.PodDeletions()[0]
	mustEqual(t, "name", d.Name, "alpha-2")
	mustEqual(t, "fleet", d.FleetUID, f.UID)
	mustEqual(t, "node state", d.NodeState, NodeReady)
	mustEqual(t, "others not ready", d.OtherNotReady, 1)
	mustEqual(t, "preconditioned", d.Preconditioned, true)
	mustEqual(t, "was ready", d.WasReady, true)

	runFor(c, time.Minute)
	// The Pod is gone (the StatefulSet made a new one): a repeat is done, and changes nothing.
	writes := len(c.Writes())
	if err := del(machine.Action{UID: p.UID}); !apierrors.IsConflict(err) {
		t.Fatalf("delete of the replaced Pod's old UID: %v, want Conflict (precondition)", err)
	}
	must(t, c.Do(machine.Action{Kind: machine.DeletePod, Key: "x", Ref: kinds.Ref{Namespace: ns, Name: "alpha-9"}, UID: "uid-x"}))
	mustEqual(t, "writes", len(c.Writes()), writes)
}

func TestReplicaWritesRecordTheStateTheyWereMadeIn(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	apply(t, c, deployment(f, 3, "celld:v1"))
	apply(t, c, deployment(f, 3, "celld:v1")) // no change: not a replica write
	runFor(c, time.Minute)
	apply(t, c, deployment(f, 2, "celld:v1"))
	apply(t, c, deployment(f, 1, "celld:v1")) // before the previous change rolled out
	runFor(c, time.Minute)
	must(t, c.CrashMember(ns, memberPods(c, f)[names(memberPods(c, f))[0]].Name))
	c.Settle()
	apply(t, c, deployment(f, 4, "celld:v1"))

	w := c.ReplicaWrites()
	mustEqual(t, "replica writes", len(w), 4)
	mustEqual(t, "first created", w[0].Created, true)
	mustEqual(t, "3->2 from", w[1].From, int32(3))
	mustEqual(t, "3->2 rolled out before", w[1].PrevRolledOut, true)
	mustEqual(t, "3->2 all ready", w[1].AllReady(), true)
	mustEqual(t, "2->1 rolled out before", w[2].PrevRolledOut, false)
	mustEqual(t, "1->4 not ready", w[3].NotReady, 1)
	mustEqual(t, "fleet", w[3].FleetUID, f.UID)
}

func TestPublishStatusWritesOnlyStatusAndOnlyWhenItChanges(t *testing.T) {
	c := newCluster(t, 1, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	st := &v1alpha1.CelldFleetStatus{State: v1alpha1.StateSteady, ObservedGeneration: 1}
	publish := func() {
		must(t, c.Do(machine.Action{Kind: machine.PublishStatus, Key: "status", Ref: kinds.Ref{Namespace: ns, Name: f.Name}, Status: st}))
	}
	publish()
	publish()
	got := c.Fleet(ns, f.Name)
	mustEqual(t, "state", got.Status.State, v1alpha1.StateSteady)
	mustEqual(t, "generation", got.Generation, int64(1))
	mustEqual(t, "writes", len(c.Writes()), 1)
	must(t, c.ClearStatus(ns, f.Name))
	mustEqual(t, "cleared", c.Fleet(ns, f.Name).Status.State, v1alpha1.FleetState(""))

	must(t, c.Do(machine.Action{Kind: machine.RecordEvent, Key: "ev", Ref: kinds.Ref{Namespace: ns, Name: f.Name}, EventType: "Normal", Reason: "Grew", Message: "3 members"}))
	mustEqual(t, "events", len(c.Events()), 1)
	must(t, c.Do(machine.Action{Kind: machine.Requeue, Key: "rq", After: time.Minute}))
	mustEqual(t, "requests", len(c.Requests()), 3)
}

// TestPublishStatusOfAnotherFleetIsRefused: a status written for a fleet's UID never lands on a
// fleet recreated under its name (the operator's patch tests metadata.uid).
func TestPublishStatusOfAnotherFleetIsRefused(t *testing.T) {
	c := newCluster(t, 1, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	st := &v1alpha1.CelldFleetStatus{State: v1alpha1.StateSteady, ObservedGeneration: 1}
	publish := func(uid types.UID) error {
		return c.Do(machine.Action{Kind: machine.PublishStatus, Key: "status", Ref: kinds.Ref{Namespace: ns, Name: f.Name}, UID: uid, Status: st})
	}
	if err := publish("uid-of-the-fleet-before"); !apierrors.IsInvalid(err) {
		t.Fatalf("a status for another UID: %v, want Invalid", err)
	}
	mustEqual(t, "state after the refusal", c.Fleet(ns, f.Name).Status.State, v1alpha1.FleetState(""))
	must(t, publish(f.UID))
	mustEqual(t, "state", c.Fleet(ns, f.Name).Status.State, v1alpha1.StateSteady)
}

func TestUserUpdatesFollowTheCRDRules(t *testing.T) {
	c := newCluster(t, 1, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfilePersistentFleet)
	if err := c.UpdateFleetSpec(ns, f.Name, func(s *v1alpha1.CelldFleetSpec) { s.Profile = v1alpha1.ProfileBucket }); !apierrors.IsInvalid(err) {
		t.Fatalf("profile change: %v, want Invalid", err)
	}
	must(t, c.Scale(ns, f.Name, 5))
	got := c.Fleet(ns, f.Name)
	mustEqual(t, "members", got.Spec.Members, int32(5))
	mustEqual(t, "generation", got.Generation, int64(2))
}
