package machine

import (
	"fmt"

	"github.com/qmuntal/stateless"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// Fleet is the lifecycle machine of one fleet. It remembers only the state it last decided, to
// tell a transition that happened since (for Kubernetes Events) and a memo of drift comparisons;
// losing either (an operator restart) changes no decision.
type Fleet struct {
	state v1alpha1.FleetState
	known bool
	sm    *stateless.StateMachine
	memo  map[memoKey]bool
}

type memoKey struct {
	kind, name, observedRV string
	uid                    types.UID
	generation             int64
	replicas               int32
	provisioned            bool
}

// New returns the machine of one fleet, with nothing remembered.
func New() *Fleet {
	m := &Fleet{memo: map[memoKey]bool{}}
	m.sm = newStateMachine(&m.state)
	return m
}

// State is the state the machine last decided.
func (m *Fleet) State() v1alpha1.FleetState { return m.state }

// Transition is one state change the decision went through.
type Transition struct {
	From, To v1alpha1.FleetState
	Trigger  Trigger
}

// Step decides for one view: the state, the status and the actions.
func (m *Fleet) Step(v *events.View) Decision {
	if v.Fleet == nil {
		m.known = false
		return Decision{}
	}
	fx := computeFacts(v)
	observed := derive(v, fx)
	d := Decision{From: observed}
	if prior := m.state; m.known && prior != observed {
		d.From = prior
		tr := completion(prior, observed)
		if tr != TriggerNone {
			_ = m.sm.Fire(tr, fx)
		}
		d.Transitions = append(d.Transitions, Transition{From: prior, To: observed, Trigger: tr})
	}
	m.state = observed
	d.Trigger = request(observed, fx)
	if d.Trigger != TriggerNone {
		// Guards and transitions are pure; an error here is a programming error in the table.
		if err := m.sm.Fire(d.Trigger, fx); err != nil {
			panic(fmt.Sprintf("machine: fire %s in %s: %v", d.Trigger, observed, err))
		}
	}
	d.To = m.state
	if d.To != observed {
		d.Transitions = append(d.Transitions, Transition{From: observed, To: d.To, Trigger: d.Trigger})
	}
	m.known = true
	p := planner{m: m, v: v, fx: fx, observed: observed, to: d.To}
	d.Actions, d.Status = p.plan(d.Transitions)
	return d
}

// completion names the transition that explains a change seen between two steps, TriggerNone when
// none does (a change made while the operator was away: the machine takes the observed state).
func completion(from, to v1alpha1.FleetState) Trigger {
	for _, t := range table {
		if t.from == from && t.to == to {
			return t.trigger
		}
	}
	return TriggerNone
}

// derive is the state the observation shows: what is in flight, whoever started it.
func derive(v *events.View, fx *facts) v1alpha1.FleetState {
	w := &v.Workload
	switch {
	case v.Deleting:
		return v1alpha1.StateDeleting
	case !w.Exists || !w.Provisioned:
		return v1alpha1.StateProvisioning
	case fx.running > w.Replicas || w.StatusReplicas > w.Replicas || (lastSizeChange(v, v1alpha1.DecisionShrinkOne, w.Replicas) && !fx.settled()):
		return v1alpha1.StateShrinkingOne
	case fx.running < int32(len(v.Members)):
		return v1alpha1.StateHealing
	case lastSizeChange(v, v1alpha1.DecisionGrow, w.Replicas) && !fx.settled():
		return v1alpha1.StateGrowing
	}
	return v1alpha1.StateSteady
}

// lastSizeChange reports whether the newest recorded change of size is of kind and sized to: the
// change the workload is rolling out. Requests that changed no size yet are skipped.
func lastSizeChange(v *events.View, kind v1alpha1.DecisionKind, to int32) bool {
	h := v.Reservation.History
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Kind == v1alpha1.DecisionGrow || h[i].Kind == v1alpha1.DecisionShrinkOne {
			return h[i].Kind == kind && h[i].To == to
		}
	}
	return false
}

// request is the trigger the observation calls for, in priority order: growth never waits,
// a lost member comes before scale-in.
func request(s v1alpha1.FleetState, fx *facts) Trigger {
	v := fx.view
	switch s {
	case v1alpha1.StateDeleting:
		return TriggerNone
	case v1alpha1.StateProvisioning:
		if v.Workload.Exists && fx.hold == "" && v.Reservation.Exists && v.Reservation.BoundTo == v.Fleet.UID && v.HasFinalizer {
			return TriggerProvisioned
		}
		return TriggerNone
	}
	switch {
	case fx.hold == "" && fx.plan.Next > fx.current:
		return TriggerTargetAbove
	case fx.candidate != nil:
		return TriggerMemberLost
	case fx.target.Members < fx.current:
		return TriggerTargetBelow
	}
	return TriggerNone
}
