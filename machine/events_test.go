package machine

import (
	"testing"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/capacity"
	"github.com/celld/celld-operator/events"
)

// TestOneEventPerChange: a change says so when it starts, a new fleet when it first becomes
// Steady, and nothing else does: not a change's end, not a step of a scale-in already under
// way (after a pause in Steady or not), which would each cost a write for nothing new.
func TestOneEventPerChange(t *testing.T) {
	const (
		prov   = v1alpha1.StateProvisioning
		steady = v1alpha1.StateSteady
		grow   = v1alpha1.StateGrowing
		shrink = v1alpha1.StateShrinkingOne
		del    = v1alpha1.StateDeleting
	)
	req := v1alpha1.CapacityDecision{Kind: v1alpha1.DecisionScaleInRequested, From: 6, To: 3}
	step := v1alpha1.CapacityDecision{Kind: v1alpha1.DecisionShrinkOne, From: 6, To: 5}
	grew := v1alpha1.CapacityDecision{Kind: v1alpha1.DecisionGrow, From: 3, To: 6}
	tr := func(states ...v1alpha1.FleetState) []Transition {
		var out []Transition
		for i := 1; i < len(states); i++ {
			out = append(out, Transition{From: states[i-1], To: states[i]})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		steps   []Transition
		history []v1alpha1.CapacityDecision
		records []v1alpha1.CapacityDecision
		want    bool
	}{
		{"nothing happened", nil, nil, nil, false},
		{"a new fleet first Steady", tr(prov, steady), nil, nil, true},
		{"a growth starts", tr(steady, grow), []v1alpha1.CapacityDecision{grew}, nil, true},
		{"a growth ends", tr(grow, steady), nil, nil, false},
		{"a scale-in ends", tr(shrink, steady), []v1alpha1.CapacityDecision{req, step}, nil, false},
		{"a scale-in step follows the last in one pass", tr(shrink, steady, shrink), []v1alpha1.CapacityDecision{req, step}, nil, false},
		{"a scale-in starts, its request recorded with the step", tr(steady, shrink), nil, []v1alpha1.CapacityDecision{req, step}, true},
		{"a scale-in starts, its request recorded before (a window)", tr(steady, shrink), []v1alpha1.CapacityDecision{grew, req}, []v1alpha1.CapacityDecision{step}, true},
		{"a scale-in resumes after a pause in Steady", tr(steady, shrink), []v1alpha1.CapacityDecision{req, step}, []v1alpha1.CapacityDecision{step}, false},
		{"a deeper scale-in after one that finished", tr(steady, shrink), []v1alpha1.CapacityDecision{req, step}, []v1alpha1.CapacityDecision{req, step}, true},
		{"a growth during a scale-in", tr(shrink, steady, grow), []v1alpha1.CapacityDecision{req, step}, nil, true},
		{"a deletion starts", tr(steady, del), nil, nil, true},
		{"a deletion preempts a growth", tr(grow, del), nil, nil, true},
		{"a heal, one pass", tr(steady, v1alpha1.StateHealing, steady), nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planner{v: &events.View{Reservation: events.ReservationView{History: tc.history}}, fx: &facts{plan: capacity.Plan{Records: tc.records}}}
			if _, _, got := p.startsChange(tc.steps); got != tc.want {
				t.Errorf("an Event: %t, want %t", got, tc.want)
			}
		})
	}
}
