package sim

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// PartitionWrite is a write by the operator of a StatefulSet whose fleet stages its rollouts
// (spec.rollout), recorded as the cluster stood just before it: what a held rollout's promise is
// judged on.
type PartitionWrite struct {
	Namespace, Name string
	// Canary is the fleet's spec.rollout.canary at the write.
	Canary int32
	// Created: the StatefulSet did not exist before.
	Created bool
	// TemplateChanged: the write changed the members' Pod template (a new revision).
	TemplateChanged bool
	// Approved: the fleet's rollout-approved annotation named the set's update revision, as its
	// controller reported it for the set's latest spec, and the template did not change.
	Approved bool
	// PrevPartition and Partition are the set's partition before and after the write; Replicas
	// is its spec.replicas after it.
	PrevPartition, Partition, Replicas int32
}

// PartitionWrites lists the operator's writes of the StatefulSets of fleets that stage their
// rollouts, in order.
func (c *Cluster) PartitionWrites() []PartitionWrite {
	return append([]PartitionWrite(nil), c.contract.partitions...)
}

func setPartition(s *appsv1.StatefulSet) int32 {
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		return *ru.Partition
	}
	return 0
}

// recordPartitionWrite records a write of a StatefulSet of a fleet that stages its rollouts.
// before is the set as stored before the write, nil when it was created.
func (c *Cluster) recordPartitionWrite(before *appsv1.StatefulSet, after *appsv1.StatefulSet) {
	f := c.fleet(after.Namespace, after.Labels[kinds.LabelInstance])
	if f == nil || f.Spec.Rollout == nil {
		return
	}
	w := PartitionWrite{Namespace: after.Namespace, Name: after.Name, Canary: f.Spec.Rollout.Canary,
		Created: before == nil, Partition: setPartition(after), Replicas: int32(specReplicas(after.Spec.Replicas))}
	if before != nil {
		w.PrevPartition = setPartition(before)
		w.TemplateChanged = !equality.Semantic.DeepEqual(before.Spec.Template, after.Spec.Template)
		a := f.Annotations[v1alpha1.AnnotationRolloutApproved]
		w.Approved = !w.TemplateChanged && a != "" && a == before.Status.UpdateRevision && before.Status.ObservedGeneration >= before.Generation
	}
	c.contract.partitions = append(c.contract.partitions, w)
}

// heldRolledOut: a StatefulSet held at its partition has rolled out as far as it goes: its
// current and update revisions differ and every member from the partition up runs the update
// revision.
func (c *Cluster) heldRolledOut(s *appsv1.StatefulSet) bool {
	if s.Status.CurrentRevision == s.Status.UpdateRevision {
		return false
	}
	p := int(setPartition(s))
	for _, pod := range c.setPods(s) {
		if setOrdinal(s, pod.Name) >= p && revision(pod) != s.Status.UpdateRevision {
			return false
		}
	}
	return true
}
