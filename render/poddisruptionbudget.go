package render

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

func init() {
	register(kinds.PodDisruptionBudget, func(f *v1alpha1.CelldFleet) []kinds.Object {
		return []kinds.Object{renderPDB(f)}
	})
}

// renderPDB lets voluntary disruptions (drains) take one member at a time, matching what celld
// tolerates: the budget counts only Ready members as healthy, so while one member is away no
// healthy member may be evicted.
//
// A member that is not Ready may always be evicted (AlwaysAllow). It is already away: evicting it
// takes nothing more from the fleet, and celld reports ready only once a member has recovered, so
// the budget never mistakes a recovering member for a healthy one. The default policy
// (IfHealthyBudget) would instead refuse that eviction whenever the budget is spent, which a stuck
// or crash-looping member spends for as long as it is stuck: its node's drain would wait forever.
func renderPDB(f *v1alpha1.CelldFleet) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	always := policyv1.AlwaysAllow
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: meta(f, f.Name, "disruption-budget"),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             &one,
			Selector:                   &metav1.LabelSelector{MatchLabels: SelectorLabels(f)},
			UnhealthyPodEvictionPolicy: &always,
		},
	}
}
