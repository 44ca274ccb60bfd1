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
	for _, orphan := range []bool{true, false} {
		v := copyView(base)
		for i := range v.Members {
			v.Members[i].Orphan = orphan
		}
		d := machine.New().Step(&v)
		var created *appsv1.StatefulSet
		for _, a := range actionsOf(d, machine.Apply) {
			if s, ok := a.Object.(*appsv1.StatefulSet); ok {
				created = s
				if a.Premise == nil || !a.Premise.Workload || a.Premise.WorkloadExists || a.Premise.FleetGeneration == 0 {
					t.Errorf("the StatefulSet created over its members carries no premise that it is still gone: %+v", a.Premise)
				}
			}
		}
		switch {
		case orphan && (created == nil || *created.Spec.Replicas != int32(len(v.Members))):
			t.Errorf("members orphaned, the fleet asked to sleep: StatefulSet created %v; want it at %d members (blockedBy %q)", created != nil, len(v.Members), d.Status.BlockedBy)
		case !orphan && created != nil:
			t.Errorf("members the garbage collector is deleting: a StatefulSet was created over them")
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
