package render

import (
	"maps"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestBudgetLetsDrainsPass: for either profile the budget lets one member go at a time and lets a
// member that is not Ready go whatever the budget: a stuck member never blocks its node's drain.
// A budget without that policy, or with the default one, is drift the operator repairs.
func TestBudgetLetsDrainsPass(t *testing.T) {
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
		pdbs := OfType[*policyv1.PodDisruptionBudget](Render(fleet(profile), 3, 3))
		if len(pdbs) != 1 {
			t.Fatalf("%s: %d budgets, want 1", profile, len(pdbs))
		}
		p := pdbs[0]
		if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 || p.Spec.MinAvailable != nil {
			t.Errorf("%s: the budget must let exactly one member go at a time: %+v", profile, p.Spec)
		}
		if p.Spec.UnhealthyPodEvictionPolicy == nil || *p.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
			t.Errorf("%s: unhealthyPodEvictionPolicy %v, want AlwaysAllow: a member that is not Ready would block its node's drain", profile, p.Spec.UnhealthyPodEvictionPolicy)
		}
		if sel := p.Spec.Selector; sel == nil || len(sel.MatchLabels) == 0 || !maps.Equal(sel.MatchLabels, SelectorLabels(fleet(profile))) {
			t.Errorf("%s: the budget must select the fleet's members: %+v", profile, sel)
		}

		observed := p.DeepCopy()
		observed.TypeMeta = metav1.TypeMeta{}
		observed.ResourceVersion, observed.Generation = "7", 2
		observed.Status.DisruptionsAllowed = 1
		if !Matches(p, observed) {
			t.Errorf("%s: a budget as applied, with the server's status, must not count as drift", profile)
		}
		for name, policy := range map[string]*policyv1.UnhealthyPodEvictionPolicyType{
			"unset": nil, "IfHealthyBudget": ptrTo(policyv1.IfHealthyBudget),
		} {
			observed.Spec.UnhealthyPodEvictionPolicy = policy
			if Matches(p, observed) {
				t.Errorf("%s: a budget with unhealthyPodEvictionPolicy %s matches, so it would never be repaired", profile, name)
			}
		}
	}
}
