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
// A member that is not Ready is evicted only while the budget holds (IfHealthyBudget, written out
// so that a hand edit is drift): alone, it goes at the first ask, so a stuck or crash-looping
// member never blocks its node's drain for longer than another member is away. AlwaysAllow
// would let it go whatever the others, and a member celld reports not ready is not policy away:
// celld answers not ready while some key it holds has one live copy, as the survivor of a member
// that just left does. Evicting that member would take the last copy, the second member away.
func renderPDB(f *v1alpha1.CelldFleet) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	policy := policyv1.IfHealthyBudget
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: meta(f, f.Name, "disruption-budget"),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             &one,
			Selector:                   &metav1.LabelSelector{MatchLabels: SelectorLabels(f)},
			UnhealthyPodEvictionPolicy: &policy,
		},
	}
}
