package machine_test

import (
	"strings"
	"testing"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/machine"
)

// A user's Pod setting that names what the operator sets is reported, and the fleet converges on
// the operator's value; a plain setting is a template change like any other, reported by nothing.
func TestSettingsOverriddenNamesEveryReservedName(t *testing.T) {
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
		base := convergedFleet(t, profile)
		if c := conditionOf(machine.New().Step(&base).Status, v1alpha1.ConditionSettingsOverridden); c.Status != "absent" {
			t.Fatalf("%s: no spec.pod, but %s=%s", profile, c.Type, c.Status)
		}

		v := copyView(base)
		v.Fleet.Spec.Pod.Env = []v1alpha1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}
		v.Fleet.Spec.Pod.Labels = map[string]v1alpha1.LabelValue{"team": "storage"}
		v.Fleet.Generation++
		d := machine.New().Step(&v)
		if c := conditionOf(d.Status, v1alpha1.ConditionSettingsOverridden); c.Status != "absent" {
			t.Errorf("%s: plain settings, but %s=%s %q", profile, c.Type, c.Status, c.Message)
		}
		if !strings.Contains(actionKinds(d), "apply/") {
			t.Errorf("%s: new Pod settings must roll out through the workload, got %s", profile, actionKinds(d))
		}

		v = copyView(base)
		v.Fleet.Spec.Pod.Env = []v1alpha1.EnvVar{{Name: "CELLD_BUCKET_NAME", Value: "other"}, {Name: "LOG_LEVEL", Value: "debug"}}
		v.Fleet.Spec.Pod.Labels = map[string]v1alpha1.LabelValue{"app.kubernetes.io/instance": "x"}
		v.Fleet.Spec.Pod.Annotations = map[string]v1alpha1.AnnotationValue{"celld.io/anything": "x"}
		v.Fleet.Generation++
		d = machine.New().Step(&v)
		c := conditionOf(d.Status, v1alpha1.ConditionSettingsOverridden)
		if c.Status != "True" || c.Reason != machine.ReasonReservedNames {
			t.Fatalf("%s: %s=%s reason %s, want True ReservedNames", profile, c.Type, c.Status, c.Reason)
		}
		for _, want := range []string{"spec.pod.env CELLD_BUCKET_NAME", "spec.pod.labels app.kubernetes.io/instance", "spec.pod.annotations celld.io/anything", "remove them from spec.pod"} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("%s: message %q lacks %q", profile, c.Message, want)
			}
		}
		if strings.Contains(c.Message, "LOG_LEVEL") {
			t.Errorf("%s: message %q names a variable that is used", profile, c.Message)
		}
		// The override itself is not a problem the fleet has: it stays healthy.
		if dg := conditionOf(d.Status, v1alpha1.ConditionDegraded); dg.Status != "False" {
			t.Errorf("%s: Degraded=%s %s", profile, dg.Status, dg.Message)
		}
	}
}

// A priority class that does not exist holds the workload as it runs: a member Pod naming it
// could not be created, and a StatefulSet deletes a member before it creates its replacement.
func TestMissingPriorityClassHoldsTheWorkload(t *testing.T) {
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
		base := convergedFleet(t, profile)
		v := copyView(base)
		v.Fleet.Spec.Pod.PriorityClassName = "fleet-critical"
		v.Fleet.Generation++
		v.PriorityClassMissing = true
		// One machine for both steps, as the operator keeps one per fleet: the class appearing
		// must be news to a held fleet's machine.
		m := machine.New()
		d := m.Step(&v)
		if strings.Contains(actionKinds(d), "apply/StatefulSet") || strings.Contains(actionKinds(d), "apply/Deployment") || strings.Contains(actionKinds(d), "delete") {
			t.Errorf("%s: class missing, but %s", profile, actionKinds(d))
		}
		c := conditionOf(d.Status, v1alpha1.ConditionDegraded)
		if c.Status != "True" || c.Reason != machine.ReasonPriorityClassMissing || !strings.Contains(c.Message, "fleet-critical") || !strings.Contains(c.Message, "spec.pod.priorityClassName") {
			t.Errorf("%s: Degraded=%s %s %q, want True PriorityClassMissing naming the class and the field", profile, c.Status, c.Reason, c.Message)
		}
		if r := conditionOf(d.Status, v1alpha1.ConditionReady); r.Status != "False" {
			t.Errorf("%s: held, but Ready=%s", profile, r.Status)
		}

		// The status published, the held fleet asks for nothing more: its machine is quiet.
		v.Fleet.Status = d.Status
		v.Fleet.ResourceVersion += "s"
		if d := m.Step(&v); len(d.Actions) != 0 {
			t.Fatalf("%s: held with its status published, but %s", profile, actionKinds(d))
		}
		v.PriorityClassMissing = false
		d = m.Step(&v)
		if !strings.Contains(actionKinds(d), "apply/") {
			t.Errorf("%s: the class exists: want the new template applied, got %s", profile, actionKinds(d))
		}
		if c := conditionOf(d.Status, v1alpha1.ConditionDegraded); c.Status != "False" {
			t.Errorf("%s: Degraded=%s %s once the class exists", profile, c.Status, c.Reason)
		}
	}
}
