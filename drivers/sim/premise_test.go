package sim

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// As the driver does, a heal's premise reads the workload it names, though the action writes a
// Pod: of that kind and name only.
func TestFreshReadsTheWorkloadAHealNames(t *testing.T) {
	c := newCluster(t, 1, Options{})
	must(t, c.Create(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: ns}}))
	gen := c.get(KindStatefulSet, ns, "alpha").GetGeneration()
	heal := func(ref kinds.Ref) machine.Action {
		return machine.Action{Kind: machine.DeletePod, Key: "heal", Ref: kinds.Ref{Kind: kinds.Pod, Namespace: ns, Name: "alpha-0"},
			Premise: &machine.Premise{Workload: true, WorkloadExists: true, WorkloadGeneration: gen, WorkloadRef: ref}}
	}
	got := c.Fresh(heal(kinds.Ref{Kind: kinds.StatefulSet, Name: "alpha"}))
	if !got.WorkloadExists || got.WorkloadGeneration != gen {
		t.Fatalf("fresh read of StatefulSet alpha: exists %t at %d; want it at %d", got.WorkloadExists, got.WorkloadGeneration, gen)
	}
	for _, ref := range []kinds.Ref{{Kind: kinds.Deployment, Name: "alpha"}, {Kind: kinds.StatefulSet, Name: "beta"}, {}} {
		if got := c.Fresh(heal(ref)); got.WorkloadExists {
			t.Errorf("fresh read naming %q found a workload at generation %d", ref, got.WorkloadGeneration)
		}
	}
}
