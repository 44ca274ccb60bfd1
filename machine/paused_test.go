package machine_test

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
)

// A paused fleet gets its status and nothing else, whatever its spec asks for, even its deletion;
// the status says it is paused and how to resume; resuming decides on the fleet as it is then, in
// one decision.
func TestPausedFleetWritesOnlyItsStatus(t *testing.T) {
	base := convergedFleet(t, v1alpha1.ProfilePersistentFleet)
	pause := func(v *events.View, value string) {
		v.Fleet.Annotations = map[string]string{v1alpha1.AnnotationPaused: value}
		v.Fleet.ResourceVersion += "p"
	}
	grow := func(v *events.View) {
		v.Fleet.Spec.Members = 5
		v.Fleet.Spec.Image = "celld:next"
		v.Fleet.Generation++
	}
	for _, c := range []struct {
		name   string
		change func(v *events.View)
		paused bool
	}{
		{"paused, then grown and given a new image", func(v *events.View) { pause(v, "true"); grow(v) }, true},
		{"a misspelt value pauses too", func(v *events.View) { pause(v, "yes"); grow(v) }, true},
		{"paused, then deleted", func(v *events.View) {
			pause(v, "true")
			v.Deleting = true
			v.Fleet.DeletionTimestamp = &metav1.Time{Time: v.Now}
		}, true},
		{"\"false\" does not pause", func(v *events.View) { pause(v, "false"); grow(v) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := copyView(base)
			c.change(&v)
			m := machine.New()
			d := m.Step(&v)
			if !c.paused {
				if !strings.Contains(actionKinds(d), "apply/StatefulSet") {
					t.Fatalf("not paused: want the workload applied, got %s", actionKinds(d))
				}
				if cond := conditionOf(d.Status, v1alpha1.ConditionReconciliationPaused); cond.Status != "absent" {
					t.Errorf("not paused, but %s=%s", cond.Type, cond.Status)
				}
				return
			}
			if len(d.Actions) != 1 || d.Actions[0].Kind != machine.PublishStatus {
				t.Fatalf("paused: want only the status published, got %s", actionKinds(d))
			}
			cond := conditionOf(d.Status, v1alpha1.ConditionReconciliationPaused)
			if cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "kubectl celld resume a") {
				t.Errorf("ReconciliationPaused=%s: %s", cond.Status, cond.Message)
			}
			if p := conditionOf(d.Status, v1alpha1.ConditionProgressing); p.Status != metav1.ConditionFalse {
				t.Errorf("paused, Progressing=%s %s", p.Status, p.Message)
			}
			if !strings.Contains(d.Status.BlockedBy, v1alpha1.AnnotationPaused) || d.Status.NextAction != "" {
				t.Errorf("blockedBy %q, nextAction %q", d.Status.BlockedBy, d.Status.NextAction)
			}
			// Once the status is written, a paused fleet costs nothing.
			v.Fleet.Status = d.Status
			v.Fleet.ResourceVersion += "s"
			if again := machine.New().Step(&v); len(again.Actions) != 0 {
				t.Errorf("paused, status written: want nothing, got %s", actionKinds(again))
			}
			// Resumed: one decision on the fleet as it is now.
			delete(v.Fleet.Annotations, v1alpha1.AnnotationPaused)
			v.Fleet.ResourceVersion += "r"
			resumed := machine.New().Step(&v)
			if !strings.Contains(actionKinds(resumed), "apply/StatefulSet") {
				t.Errorf("resumed: want the workload written, got %s", actionKinds(resumed))
			}
			if cond := conditionOf(resumed.Status, v1alpha1.ConditionReconciliationPaused); cond.Status != "absent" {
				t.Errorf("resumed, but %s=%s", cond.Type, cond.Status)
			}
		})
	}
}

// A restart requested on a converged fleet is applied by the same machine that decided it
// converged: what it remembers of the workload's match covers the restart annotation too.
func TestRestartReachesTheWorkload(t *testing.T) {
	v := copyView(convergedFleet(t, v1alpha1.ProfilePersistentFleet))
	m := machine.New()
	if d := m.Step(&v); len(d.Actions) != 0 {
		t.Fatalf("converged: want nothing, got %s", actionKinds(d))
	}
	for _, at := range []string{"2026-11-30T18:00:00Z", "2026-11-30T19:00:00Z"} {
		v.Fleet.Annotations = map[string]string{v1alpha1.AnnotationRestartedAt: at}
		v.Fleet.ResourceVersion += "r"
		d := m.Step(&v)
		var tmpl string
		for _, a := range d.Actions {
			if s, ok := a.Object.(*appsv1.StatefulSet); ok && a.Kind == machine.Apply {
				tmpl = s.Spec.Template.Annotations[v1alpha1.AnnotationRestartedAt]
				v.Owned.StatefulSet = s.DeepCopy()
				v.Owned.StatefulSet.ResourceVersion += at
			}
		}
		if tmpl != at {
			t.Errorf("restart at %s: want the StatefulSet applied with it in its Pod template, got %s", at, actionKinds(d))
		}
	}
}

// Pausing a fleet changes Progressing from True to False, and that is a transition: its time is
// the pause's, not the rollout's that made it True. Once written, the paused fleet's conditions
// keep their times, however late it is decided on again.
func TestPausedConditionsTellWhenTheyChanged(t *testing.T) {
	v := copyView(convergedFleet(t, v1alpha1.ProfilePersistentFleet))
	rolloutBegan := metav1.NewTime(v.Now.Add(-time.Hour).UTC().Truncate(time.Second))
	for i := range v.Fleet.Status.Conditions {
		if c := &v.Fleet.Status.Conditions[i]; c.Type == v1alpha1.ConditionProgressing {
			c.Status, c.LastTransitionTime = metav1.ConditionTrue, rolloutBegan
		}
	}
	v.Fleet.Annotations = map[string]string{v1alpha1.AnnotationPaused: "true"}
	v.Fleet.Spec.Members = 5
	v.Fleet.Generation++
	v.Fleet.ResourceVersion += "p"
	now := metav1.NewTime(v.Now.UTC().Truncate(time.Second))
	d := machine.New().Step(&v)
	for _, typ := range []string{v1alpha1.ConditionProgressing, v1alpha1.ConditionReconciliationPaused} {
		if c := conditionOf(d.Status, typ); !c.LastTransitionTime.Equal(&now) {
			t.Errorf("paused: %s=%s since %s, want since the pause (%s)", typ, c.Status, c.LastTransitionTime.UTC(), now.UTC())
		}
	}

	written := d.Status
	v.Fleet.Status = written
	v.Fleet.ResourceVersion += "s"
	v.Now = v.Now.Add(10 * time.Minute)
	again := machine.New().Step(&v)
	if len(again.Actions) != 0 {
		t.Errorf("paused, status written, decided again 10 minutes later: want nothing, got %s", actionKinds(again))
	}
	for _, c := range written.Conditions {
		if got := conditionOf(again.Status, c.Type); !got.LastTransitionTime.Equal(&c.LastTransitionTime) || got.Status != c.Status {
			t.Errorf("decided again: %s=%s since %s, want %s since %s as written", c.Type, got.Status, got.LastTransitionTime.UTC(),
				c.Status, c.LastTransitionTime.UTC())
		}
	}
}
