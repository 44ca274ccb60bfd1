package machine

import (
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// Decision is the machine's answer to one view.
type Decision struct {
	// From is the state the observation shows; To is the state after this decision.
	From, To v1alpha1.FleetState
	Trigger  Trigger
	// Transitions lists the state changes: one the observation explains, one this step decides.
	Transitions []Transition
	// Unhandled lists the triggers fired that the lifecycle table has no row for (a table bug);
	// empty unless PanicOnUnhandledTrigger is off.
	Unhandled []Transition
	Actions   []Action
	Status    v1alpha1.CelldFleetStatus
}

// Step decides for one view with a fresh machine.
func Step(v *events.View) Decision { return New().Step(v) }
