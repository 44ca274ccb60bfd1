package machine_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	kindsPkg "github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// A fleet asked to sleep right after its StatefulSet was deleted with propagation Orphan (a new
// claim template) has members that nothing owns: nothing would ever stop them. The StatefulSet
// is created again over them at their number, for the next pass to stop. Members that still name
// the StatefulSet a stop deleted are the garbage collector's: nothing is created over them.
func TestSleepStopsMembersAStatefulSetOrphaned(t *testing.T) {
	base := copyView(convergedFleet(t, v1alpha1.ProfilePersistentFleet))
	base.Fleet.Spec.Hibernate = true
	base.Workload = events.WorkloadView{}
	base.Owned.StatefulSet = nil
	n := len(base.Members)
	// Each case sets member i's Orphan and Terminating.
	for _, c := range []struct {
		name        string
		orphan      func(i int) bool
		terminating func(i int) bool
		create      bool
	}{
		{"every member an orphan", func(int) bool { return true }, func(int) bool { return false }, true},
		{"every member the garbage collector's", func(int) bool { return false }, func(int) bool { return false }, false},
		// The garbage collector deletes the one it owns; the others nothing would stop.
		{"orphans beside a terminating member", func(i int) bool { return i > 0 }, func(i int) bool { return i == 0 }, true},
		// One still names the StatefulSet: the stop's own, going; create nothing over it.
		{"an orphan beside a member still owned", func(i int) bool { return i > 0 }, func(int) bool { return false }, false},
	} {
		v := copyView(base)
		for i := range v.Members {
			v.Members[i].Orphan = c.orphan(i)
			v.Members[i].Terminating = c.terminating(i)
		}
		d := machine.New().Step(&v)
		var created *appsv1.StatefulSet
		for _, a := range actionsOf(d, machine.Apply) {
			if s, ok := a.Object.(*appsv1.StatefulSet); ok {
				created = s
				if a.Premise == nil || !a.Premise.Workload || a.Premise.WorkloadExists || a.Premise.FleetGeneration == 0 {
					t.Errorf("%s: the StatefulSet created over its members carries no premise that it is still gone: %+v", c.name, a.Premise)
				}
			}
		}
		switch {
		case c.create && created == nil:
			t.Errorf("%s, the fleet asked to sleep: no StatefulSet created over them (blockedBy %q)", c.name, d.Status.BlockedBy)
		case c.create && *created.Spec.Replicas != int32(n):
			t.Errorf("%s: StatefulSet created at %d members; want it at the fleet's %d, the number its members had", c.name, *created.Spec.Replicas, n)
		case !c.create && created != nil:
			t.Errorf("%s: a StatefulSet was created over members the garbage collector is deleting", c.name)
		}
	}
}

// The budget's mark, the first write of a hibernation, is sent only on a fresh read that the
// fleet is still at the generation decided on: a cache that has not seen the fleet deleted (its
// CRD with it) must not make the operator write after an uninstall.
func TestSleepMarkCarriesTheFleetGeneration(t *testing.T) {
	v := copyView(convergedFleet(t, v1alpha1.ProfilePersistentFleet))
	v.Fleet.Spec.Hibernate = true
	d := machine.New().Step(&v)
	marked := false
	for _, a := range actionsOf(d, machine.Apply) {
		if a.Ref.Kind == kindsPkg.PodDisruptionBudget {
			marked = true
			if a.Premise == nil || a.Premise.FleetGeneration != v.Fleet.Generation || a.Premise.Fleet != v.Fleet.Name {
				t.Errorf("the budget's mark carries premise %+v; want the fleet %s at generation %d", a.Premise, v.Fleet.Name, v.Fleet.Generation)
			}
		}
	}
	if !marked {
		t.Fatalf("no mark on the budget when the fleet is asked to sleep: %v", d.Actions)
	}
}
