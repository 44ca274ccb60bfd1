package render

import (
	"maps"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestBudgetLetsDrainsPass: for either profile the budget lets one member go at a time, and a
// member that is not Ready only while the budget holds (IfHealthyBudget, written out): never while
// another member is away, for a member celld reports not ready may hold the last copy of a key.
// A budget without the policy, or with AlwaysAllow, is drift the operator repairs.
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
		if p.Spec.UnhealthyPodEvictionPolicy == nil || *p.Spec.UnhealthyPodEvictionPolicy != policyv1.IfHealthyBudget {
			t.Errorf("%s: unhealthyPodEvictionPolicy %v, want IfHealthyBudget: a member that is not Ready may hold the last copy while another is away", profile, p.Spec.UnhealthyPodEvictionPolicy)
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
			"unset": nil, "AlwaysAllow": ptrTo(policyv1.AlwaysAllow),
		} {
			observed.Spec.UnhealthyPodEvictionPolicy = policy
			if Matches(p, observed) {
				t.Errorf("%s: a budget with unhealthyPodEvictionPolicy %s matches, so it would never be repaired", profile, name)
			}
		}
	}
}

// TestReadinessProbeTiming: without spec.readiness the probe is exactly what it always was
// (no timing: Kubernetes' defaults, a window of about 31s), so an operator upgrade changes no
// member's template; a fleet's spec.readiness sets each field it gives and Kubernetes' default for
// the others, and a workload probed on other timing is drift, so setting it rolls the members.
func TestReadinessProbeTiming(t *testing.T) {
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
		f := fleet(profile)
		p := templateOf(workloadOf(Render(f, 3, 3))).Spec.Containers[0].ReadinessProbe
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.StrVal != clientPortName {
			t.Fatalf("%s: readiness probe %+v, want celld's /readyz on the client port", profile, p)
		}
		if p.PeriodSeconds != 0 || p.FailureThreshold != 0 || p.TimeoutSeconds != 0 || p.SuccessThreshold != 0 {
			t.Errorf("%s: a fleet without spec.readiness got probe timing %+v: every member would restart on the operator's upgrade", profile, p)
		}
		if w := ReadinessWindow(p); w != 31 {
			t.Errorf("%s: window %ds with Kubernetes' defaults; want 31", profile, w)
		}

		f.Spec.Readiness = &v1alpha1.ReadinessSpec{PeriodSeconds: ptrTo(int32(2)), TimeoutSeconds: ptrTo(int32(2))}
		q := templateOf(workloadOf(Render(f, 3, 3))).Spec.Containers[0].ReadinessProbe
		if q.PeriodSeconds != 2 || q.TimeoutSeconds != 2 || q.FailureThreshold != 3 || q.SuccessThreshold != 1 {
			t.Errorf("%s: spec.readiness {periodSeconds: 2, timeoutSeconds: 2} rendered %+v; want those, failureThreshold 3 and successThreshold 1", profile, q)
		}
		if w := ReadinessWindow(q); w != 8 {
			t.Errorf("%s: window %ds; want 2*3+2", profile, w)
		}
		f.Spec.Readiness = &v1alpha1.ReadinessSpec{FailureThreshold: ptrTo(int32(2))}
		if q := templateOf(workloadOf(Render(f, 3, 3))).Spec.Containers[0].ReadinessProbe; q.PeriodSeconds != 10 || q.FailureThreshold != 2 || q.TimeoutSeconds != 1 {
			t.Errorf("%s: spec.readiness {failureThreshold: 2} rendered %+v; want Kubernetes' period and timeout", profile, q)
		}
		if Matches(workloadOf(Render(f, 3, 3)), workloadOf(Render(fleet(profile), 3, 3))) {
			t.Errorf("%s: a workload probed on the default timing matches a fleet that asks for another", profile)
		}
	}
}
