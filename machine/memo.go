package machine

import (
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

// render renders the fleet's objects. Kept as a method so a cache can sit here if profiles show
// rendering on the converged path.
// partition is the StatefulSet's rollingUpdate partition (0 for a workload that stages nothing).
func (m *Fleet) render(v *events.View, fs string, replicas, settled, partition int32) *render.Objects {
	o := render.Render(templateFleet(v, fs), replicas, settled)
	if partition != 0 {
		render.SetPartition(o.StatefulSet, partition)
	}
	return o
}

// matches compares a desired object with its observed twin, remembering the answer for the same
// observed resourceVersion and the same desired inputs: a converged fleet compares nothing twice.
func (m *Fleet) matches(v *events.View, desired kinds.Object, fs string, replicas, settled, partition int32) bool {
	ref := kinds.RefOf(desired)
	observed, rv := v.Owned.Twin(ref.Kind, ref.Name)
	if observed == nil {
		return false
	}
	k := memoKey{kind: string(ref.Kind), name: ref.Name, observedRV: rv, uid: v.Fleet.UID, generation: v.Fleet.Generation, replicas: replicas, settled: settled, partition: partition,
		restartedAt: v.Fleet.Annotations[v1alpha1.AnnotationRestartedAt], filesystemResize: fs,
		hibernated: desired.GetAnnotations()[kinds.AnnotationHibernated]}
	if ok, hit := m.memo[k]; hit {
		return ok
	}
	ok := render.Matches(desired, observed)
	if len(m.memo) > 64 {
		clear(m.memo)
	}
	m.memo[k] = ok
	return ok
}
