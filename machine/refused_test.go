package machine

import (
	"strings"
	"testing"
	"time"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// An object the API server refused as rendered from this generation of the spec holds every apply
// and says why in a Degraded condition, instead of retrying the same refusal with no status; a
// new generation of the spec tries again.
func TestRefusedSpecIsDegradedNotRetried(t *testing.T) {
	f := fleet(v1alpha1.ProfilePersistentFleet)
	f.Finalizers = []string{v1alpha1.FleetFinalizer}
	refusal := &events.Refusal{Generation: 1, Object: "StatefulSet/ns/a/replicas=3", Message: "spec.template.spec.affinity: Invalid value"}
	v := events.Normalize("ns", "a", &events.Observation{Now: time.Unix(0, 0), Fleet: f, Refused: refusal})
	d := Step(&v)
	var status *v1alpha1.CelldFleetStatus
	for _, a := range d.Actions {
		if a.Kind == Apply {
			t.Errorf("a refused spec must apply nothing, got %s", a)
		}
		if a.Kind == PublishStatus {
			status = a.Status
		}
	}
	if status == nil {
		t.Fatal("the refusal must be published")
	}
	var degraded bool
	for _, c := range status.Conditions {
		if c.Type == v1alpha1.ConditionDegraded && c.Status == "True" && c.Reason == "SpecRefused" && strings.Contains(c.Message, "affinity") {
			degraded = true
		}
	}
	if !degraded {
		t.Errorf("want Degraded=True SpecRefused naming the refused field: %+v", status.Conditions)
	}
	f2 := f.DeepCopy()
	f2.Generation = 2
	v = events.Normalize("ns", "a", &events.Observation{Now: time.Unix(0, 0), Fleet: f2, Refused: refusal})
	applies := 0
	for _, a := range Step(&v).Actions {
		if a.Kind == Apply {
			applies++
		}
	}
	if applies == 0 {
		t.Error("a new generation of the spec must be tried again")
	}
}
