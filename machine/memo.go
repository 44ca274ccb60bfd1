package machine

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// render renders the fleet's objects. Kept as a method so a cache can sit here if profiles show
// rendering on the converged path.
func (m *Fleet) render(f *v1alpha1.CelldFleet, replicas, settled int32) *Objects {
	return Render(f, replicas, settled)
}

// matches compares a desired object with its observed twin, remembering the answer for the same
// observed resourceVersion and the same desired inputs: a converged fleet compares nothing twice.
func (m *Fleet) matches(v *events.View, desired any, replicas, settled int32) bool {
	kind, name := kindName(desired)
	observed, rv := observedTwin(v, kind, name)
	if observed == nil {
		return false
	}
	k := memoKey{kind: kind, name: name, observedRV: rv, uid: v.Fleet.UID, generation: v.Fleet.Generation, replicas: replicas, settled: settled,
		restartedAt: v.Fleet.Annotations[v1alpha1.AnnotationRestartedAt]}
	if ok, hit := m.memo[k]; hit {
		return ok
	}
	ok := Matches(desired, observed)
	if len(m.memo) > 64 {
		clear(m.memo)
	}
	m.memo[k] = ok
	return ok
}

func kindName(o any) (kind, name string) {
	switch x := o.(type) {
	case *appsv1.StatefulSet:
		return "StatefulSet", x.Name
	case *appsv1.Deployment:
		return "Deployment", x.Name
	case *corev1.Service:
		return "Service", x.Name
	case *networkingv1.NetworkPolicy:
		return "NetworkPolicy", x.Name
	case *policyv1.PodDisruptionBudget:
		return "PodDisruptionBudget", x.Name
	}
	return "", ""
}

func observedTwin(v *events.View, kind, name string) (any, string) {
	switch kind {
	case "StatefulSet":
		if s := v.Owned.StatefulSet; s != nil && s.Name == name {
			return s, s.ResourceVersion
		}
		return nil, ""
	case "Deployment":
		if d := v.Owned.Deployment; d != nil && d.Name == name {
			return d, d.ResourceVersion
		}
		return nil, ""
	}
	for i := range v.Owned.Objects {
		if o := &v.Owned.Objects[i]; o.Kind == kind && o.Name == name {
			return o.Object, o.ResourceVersion
		}
	}
	return nil, ""
}
