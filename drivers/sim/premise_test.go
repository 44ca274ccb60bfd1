package sim

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

// As the driver does, a disk delete confirmed on the cluster's truth carries the claim's current
// resourceVersion: a claim changed since the decision is deleted, not refused with a conflict.
// One replaced under its name is not.
func TestDiskDeletedAtTheConfirmedVersion(t *testing.T) {
	c := newCluster(t, 1, Options{})
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-alpha-0", Namespace: ns,
		Labels: map[string]string{kinds.LabelFleetUID: "uid-alpha"}}}
	must(t, c.Create(claim))
	seen := c.claim(ns, "data-alpha-0").DeepCopy()
	del := machine.Action{Kind: machine.DeleteDisk, Key: "disk", Ref: kinds.Ref{Kind: kinds.PersistentVolumeClaim, Namespace: ns, Name: seen.Name},
		UID: seen.UID, ResourceVersion: seen.ResourceVersion, Premise: &machine.Premise{NoMembers: true, DiskOf: "uid-alpha", DiskUID: seen.UID}}
	touched := seen.DeepCopy()
	touched.Annotations = map[string]string{"touched": "by a controller"}
	if !c.put(touched) {
		t.Fatal("the claim did not change")
	}
	if err := c.Do(del); err != nil {
		t.Fatalf("delete of a claim changed since the decision: %v", err)
	}
	if got := c.claim(ns, seen.Name); got != nil && got.DeletionTimestamp == nil {
		t.Fatalf("the claim is not being deleted")
	}
}
