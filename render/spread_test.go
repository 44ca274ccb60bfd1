package render

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestSpreadCompletesOnlyWhatIsLeftOut: a spread constraint given without a labelSelector counts
// the fleet's own members (the fleet's selector); without one, the scheduler would count no Pod
// at all and spread nothing. One given with a selector, even one of expressions alone, is the
// user's and is kept as written; every other field is kept too, and the fleet is not changed.
func TestSpreadCompletesOnlyWhatIsLeftOut(t *testing.T) {
	minDomains := int32(2)
	ignore := corev1.NodeInclusionPolicyIgnore
	theirs := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app.kubernetes.io/part-of", Operator: metav1.LabelSelectorOpIn, Values: []string{"storage"}}}}
	labelled := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "data"}}
	given := []corev1.TopologySpreadConstraint{
		{MaxSkew: 2, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, MinDomains: &minDomains,
			NodeAffinityPolicy: &ignore, MatchLabelKeys: []string{"pod-template-hash"}},
		{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: theirs},
		{MaxSkew: 3, TopologyKey: "rack", WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: labelled},
	}
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfileBucket, v1alpha1.ProfilePersistentFleet} {
		f := fleet(profile)
		f.Spec.Placement.TopologySpreadConstraints = given
		before := f.DeepCopy()
		got := templateOf(workloadOf(Render(f, 3, 3))).Spec.TopologySpreadConstraints
		if !reflect.DeepEqual(f, before) {
			t.Errorf("%s: rendering changed the fleet's spec", profile)
		}
		if len(got) != len(given) {
			t.Fatalf("%s: %d constraints rendered, %d given", profile, len(got), len(given))
		}
		want := make([]corev1.TopologySpreadConstraint, len(given))
		for i := range given {
			want[i] = *given[i].DeepCopy()
		}
		want[0].LabelSelector = &metav1.LabelSelector{MatchLabels: SelectorLabels(f)}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: rendered\n%+v\nwant\n%+v", profile, got, want)
		}
	}
}
