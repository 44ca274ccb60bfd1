package sim

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

func TestFleetDeletionWaitsForTheFinalizerThenCollectsWhatItOwns(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfilePersistentFleet)
	must(t, c.Do(machine.Action{Kind: machine.BindReservation, Key: "bind", Ref: kinds.Ref{Namespace: ns}, Object: &v1alpha1.CelldReservation{
		ObjectMeta: metav1.ObjectMeta{Name: "alpha-bucket", Namespace: ns}, Spec: v1alpha1.CelldReservationSpec{FleetName: f.Name, FleetUID: f.UID,
			Profile: f.Spec.Profile, Bucket: f.Spec.Bucket}}}))
	must(t, c.Do(machine.Action{Kind: machine.AddFinalizer, Key: "fin", Ref: kinds.Ref{Namespace: ns, Name: f.Name}}))
	objs := append(prerequisites(f), statefulSet(f, 3, "celld:v1"))
	for _, o := range objs {
		apply(t, c, o)
	}
	runFor(c, 3*time.Minute)
	c.Drain()

	must(t, c.DeleteFleet(ns, f.Name))
	evs := c.Drain()
	if len(evs) != 1 || evs[0].Kind != Observed || evs[0].Object.(*v1alpha1.CelldFleet).DeletionTimestamp == nil {
		t.Fatalf("deletion events %v, want one fleet observed with its deletion requested", evs)
	}
	runFor(c, 5*time.Minute)
	if got := c.Fleet(ns, f.Name); got == nil || got.DeletionTimestamp == nil {
		t.Fatalf("fleet with a finalizer: %v, want it kept, being deleted", got)
	}
	for _, o := range objs {
		if c.get(mustKind(o), ns, o.(object).GetName()) == nil {
			t.Fatalf("%T %s collected while its owner still exists", o, o.(object).GetName())
		}
	}
	must(t, c.Do(machine.Action{Kind: machine.RemoveFinalizer, Key: "fin", Ref: kinds.Ref{Namespace: ns, Name: f.Name}}))
	if c.Fleet(ns, f.Name) != nil {
		t.Fatal("fleet kept after its last finalizer went")
	}

	c.Settle()
	for _, o := range objs {
		if c.get(mustKind(o), ns, o.(object).GetName()) != nil {
			t.Fatalf("%T %s not collected after its owner went", o, o.(object).GetName())
		}
	}
	if n := len(memberPods(c, f)); n == 0 {
		t.Fatal("members went at once; they get a graceful deletion")
	}
	runFor(c, time.Minute)
	mustEqual(t, "members after their grace", len(memberPods(c, f)), 0)
	mustEqual(t, "retained claims", len(c.PVCs(ns)), 3)
	if c.Reservation(ns, "alpha-bucket") == nil {
		t.Fatal("the reservation went with the fleet")
	}
}

func TestAddFinalizerToAFleetBeingDeletedIsRefused(t *testing.T) {
	c := newCluster(t, 1, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	next := c.Fleet(ns, f.Name)
	next.Finalizers = []string{"someone.else/keep"}
	c.put(next)
	must(t, c.DeleteFleet(ns, f.Name))
	err := c.Do(machine.Action{Kind: machine.AddFinalizer, Key: "fin", Ref: kinds.Ref{Namespace: ns, Name: f.Name}})
	if err == nil {
		t.Fatal("added a finalizer to a fleet being deleted")
	}
	// Removing ours when it is not there, or when the fleet is gone, is done.
	must(t, c.Do(machine.Action{Kind: machine.RemoveFinalizer, Key: "fin", Ref: kinds.Ref{Namespace: ns, Name: f.Name}}))
	must(t, c.Do(machine.Action{Kind: machine.RemoveFinalizer, Key: "fin", Ref: kinds.Ref{Namespace: ns, Name: "nope"}}))
	mustEqual(t, "writes", len(c.Writes()), 0)
}
