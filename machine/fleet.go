package machine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/qmuntal/stateless"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// Fleet is the lifecycle machine of one fleet. The state it steps from is derived from
// observation every time; what it keeps between steps is a memo of drift comparisons and what
// its writes were, learnt only when they were made (Advance, the acknowledgment point), whose
// loss (an operator restart) changes no decision.
type Fleet struct {
	state v1alpha1.FleetState
	sm    *stateless.StateMachine
	memo  map[memoKey]bool
	// quiet is the last decision when it asked for nothing, and the fingerprint of its view: the
	// same view again (a resync, an event that changed nothing the machine reads) decides the
	// same nothing, without deciding again.
	quiet   *Decision
	quietFP uint64
	// fired is the row the last Fire took (a reentry too), nil when it took none.
	fired *Transition
	// unhandled is the last trigger fired that the table has no row for.
	unhandled Trigger
	// The acknowledgment point's memory, set by Advance alone.
	//
	// published is when the decision that last wrote the fleet's status was made, and asked the
	// status it wrote: a status is written at most once per ProgressInterval while the fleet
	// shows the status asked for. Both are set together; asked is nil after a restart, which
	// writes at once.
	published time.Time
	asked     *v1alpha1.CelldFleetStatus
	// announced are the disks a DiskDeleted Event of this machine named. A step on a cache that
	// has not seen their deletes yet plans them again (the driver sends no delete for a claim
	// its fresh read finds going already), but names none of them a second time.
	announced map[types.UID]bool
	// resizing is the size a DiskResizeStarted Event of this machine announced, until its
	// DiskResized Event went out: a resize that ends before any status showed it on its way is
	// told to have ended all the same. resized is the size the last DiskResized Event told of:
	// told once, whichever way it was learnt.
	resizing, resized string
	// evictions are the evicted members a MemberEvicted Event of this machine told of, while
	// they are in view.
	evictions map[types.UID]bool

	// evictionsInView are the evicted members the last decision saw: Advance forgets the others.
	evictionsInView map[types.UID]bool
	// announcing are the disks the last decision's DiskDeleted Event names, by the Event's key:
	// they count as announced once Advance says the Event was recorded.
	announcing map[string][]types.UID
}

type memoKey struct {
	kind, name, observedRV string
	uid                    types.UID
	generation             int64
	replicas, settled      int32
	partition              int32
	// restartedAt and filesystemResize: the inputs of rendering outside the fleet's spec (its
	// generation).
	restartedAt, filesystemResize string
	// hibernated is the mark the desired budget carries (hibernate.go), which the step decides.
	hibernated string
}

// New returns the machine of one fleet.
func New() *Fleet {
	m := &Fleet{memo: map[memoKey]bool{}}
	m.sm = newStateMachine(&m.state)
	m.sm.OnTransitioned(func(_ context.Context, t stateless.Transition) {
		m.fired = &Transition{From: t.Source.(v1alpha1.FleetState), To: t.Destination.(v1alpha1.FleetState), Trigger: t.Trigger.(Trigger)}
	})
	m.sm.OnUnhandledTrigger(func(_ context.Context, s stateless.State, tr stateless.Trigger, unmetGuards []string) error {
		if len(unmetGuards) > 0 {
			// A guard that does not hold leaves the state as it is: the fleet waits, and its
			// status says for what.
			return nil
		}
		m.unhandled = tr.(Trigger)
		return nil
	})
	return m
}

// PanicOnUnhandledTrigger makes a trigger the lifecycle table has no row for (not even an
// ignore) a panic: a hole in the table must fail the tests that reach it, and every test package
// that steps a machine turns it on (its unhandled_test.go). In production the decision reports
// it in Decision.Unhandled instead, for the driver to log and count.
var PanicOnUnhandledTrigger bool

// Transition is one state change a step went through (a reentry, From == To, too).
type Transition struct {
	From, To v1alpha1.FleetState
	Trigger  Trigger
}

// Step decides for one view: the state, the status and the actions. It fires at most two
// triggers, run to completion: the one that completes the change in flight (the observation
// shows it rolled out), then the one the fleet's request calls for.
func (m *Fleet) Step(v *events.View) Decision {
	m.announcing = nil
	if v.Fleet == nil {
		return Decision{}
	}
	fp := v.Fingerprinted()
	if m.quiet != nil && m.quietFP == fp {
		return *m.quiet
	}
	fx := computeFacts(v)
	observed := derive(v, fx)
	m.state = observed
	d := Decision{From: observed}
	triggers := []Trigger{completion(observed, fx), request(observed, fx)}
	if v.Deleting && observed != v1alpha1.StateDeleting {
		// Deletion preempts whatever was in flight: it is the one trigger of this step.
		triggers = []Trigger{TriggerDeletionRequested}
	}
	for _, tr := range triggers {
		if tr == TriggerNone {
			continue
		}
		from := m.state
		m.fired, m.unhandled = nil, TriggerNone
		// Guards and transitions are pure; an error here is a programming error in the table.
		if err := m.sm.Fire(tr, fx); err != nil {
			panic(fmt.Sprintf("machine: fire %s in %s: %v", tr, from, err))
		}
		if m.unhandled != TriggerNone {
			if PanicOnUnhandledTrigger {
				panic(fmt.Sprintf("machine: the lifecycle table has no row for %s in %s", tr, from))
			}
			d.Unhandled = append(d.Unhandled, Transition{From: from, To: from, Trigger: tr})
		}
		if m.fired != nil {
			d.Transitions = append(d.Transitions, *m.fired)
		}
		d.Trigger = tr
	}
	d.To = m.state
	p := planner{m: m, v: v, fx: fx, observed: observed, to: d.To, settledNow: settledAfter(d, fx)}
	if v.Fleet.Paused() {
		d = Decision{From: observed, To: observed}
		p.to = observed
		d.Actions, d.Status = p.paused()
	} else {
		d.Actions, d.Status = p.plan(d.Transitions)
	}
	m.quiet = nil
	if len(d.Actions) == 0 {
		q := d
		m.quiet, m.quietFP = &q, fp
	}
	return d
}

// Advance is the acknowledgment point: the loop tells the machine which of a decision's actions
// were made (sent, or handed to a driver that writes them later, and not refused), in the order
// of the decision, and when it was decided (the view's Now). What the machine remembers of its
// writes, it learns here and nowhere else: a decision that was not carried out (a failure
// before its status or its Event went out) leaves the machine as if it had not been decided.
func (m *Fleet) Advance(done []Action, decided time.Time) {
	for i := range done {
		a := &done[i]
		switch {
		case a.Kind == PublishStatus && a.Status != nil:
			m.published, m.asked = decided, a.Status
		case a.Kind == RecordEvent && strings.HasPrefix(a.Key, ResizeStartedEventPrefix):
			m.resizing = strings.TrimPrefix(a.Key, ResizeStartedEventPrefix)
		case a.Kind == RecordEvent && strings.HasPrefix(a.Key, ResizeDoneEventPrefix):
			m.resizing, m.resized = "", strings.TrimPrefix(a.Key, ResizeDoneEventPrefix)
		case a.Kind == RecordEvent && strings.HasPrefix(a.Key, EvictedEventPrefix):
			if m.evictions == nil {
				m.evictions = map[types.UID]bool{}
			}
			m.evictions[types.UID(strings.TrimPrefix(a.Key, EvictedEventPrefix))] = true
		case a.Kind == RecordEvent && len(m.announcing[a.Key]) > 0:
			if m.announced == nil {
				m.announced = map[types.UID]bool{}
			}
			for _, uid := range m.announcing[a.Key] {
				m.announced[uid] = true
			}
		}
	}
	for uid := range m.evictions {
		if !m.evictionsInView[uid] {
			delete(m.evictions, uid)
		}
	}
	m.announcing = nil
}

// settledAfter is the size to record as settled on the workload after this step: the current
// size once a step passes through Steady, else what the workload records already.
func settledAfter(d Decision, fx *facts) int32 {
	if d.From == v1alpha1.StateSteady || fx.orphaned {
		// A StatefulSet created again over the members it left is at the size they settled at.
		return fx.current
	}
	for _, t := range d.Transitions {
		if t.To == v1alpha1.StateSteady {
			return fx.current
		}
	}
	return fx.view.Workload.Settled
}

// derive is the state the observation shows: what is in flight, whoever started it. Healing is
// never in flight: it is one decision (delete that Pod), entered by its trigger; what follows is
// observed as the workload's own state. Deleting is in flight once the workload is stopped, or
// gone with members or disks left; before that, the deletion is a trigger that enters it.
func derive(v *events.View, fx *facts) v1alpha1.FleetState {
	w := &v.Workload
	switch {
	case v.Deleting && deletionInFlight(v):
		return v1alpha1.StateDeleting
	case v.Asleep:
		return asleepState(v)
	case fx.orphaned:
		// The StatefulSet is being created again over its running members (a new claim
		// template): nothing is in flight but that.
		return v1alpha1.StateSteady
	case !w.Exists || w.Settled < 0:
		return v1alpha1.StateProvisioning
	case w.Replicas < w.Settled:
		return v1alpha1.StateShrinkingOne
	case w.Replicas > w.Settled:
		return v1alpha1.StateGrowing
	}
	return v1alpha1.StateSteady
}

// deletionInFlight: the workload was stopped (a fleet has at least one member otherwise), or is
// gone while members or the fleet's disks remain.
func deletionInFlight(v *events.View) bool {
	if w := &v.Workload; w.Exists {
		return w.Replicas == 0
	}
	if len(v.Members) > 0 {
		return true
	}
	for _, d := range v.Disks {
		if d.FleetUID == v.Fleet.UID {
			return true
		}
	}
	return false
}

// completion is the trigger that ends the change in flight, if the observation shows it ended;
// its guard decides.
func completion(s v1alpha1.FleetState, fx *facts) Trigger {
	switch s {
	case v1alpha1.StateProvisioning:
		v := fx.view
		if v.Workload.Exists && fx.hold == "" && v.Reservation.Exists && v.Reservation.BoundTo == v.Fleet.UID && v.HasFinalizer {
			return TriggerProvisioned
		}
	case v1alpha1.StateHibernating:
		return TriggerStopped
	case v1alpha1.StateGrowing, v1alpha1.StateShrinkingOne, v1alpha1.StateWaking:
		// A held fleet cannot record the settled size on its workload: completing here would
		// complete again, with another Event, on every pass.
		if fx.hold == "" {
			return TriggerRolledOut
		}
	}
	return TriggerNone
}

// request is the trigger the fleet's request calls for, in priority order: growth never waits,
// a lost member comes before scale-in.
func request(s v1alpha1.FleetState, fx *facts) Trigger {
	hibernate := fx.view.Fleet.Spec.Hibernate
	switch s {
	case v1alpha1.StateDeleting:
		return TriggerNone
	case v1alpha1.StateHibernating, v1alpha1.StateHibernated:
		if !hibernate {
			return TriggerWake
		}
		return TriggerNone
	}
	if hibernate {
		return TriggerHibernate
	}
	switch s {
	case v1alpha1.StateProvisioning, v1alpha1.StateWaking:
		// A member that cannot come back keeps a fleet from ever finishing provisioning (an ordered
		// StatefulSet waits forever on a member of a broken revision): it is healed there too.
		if fx.candidate != nil && fx.hold == "" {
			return TriggerMemberLost
		}
		return TriggerNone
	}
	switch {
	case fx.hold == "" && fx.plan.Next > fx.current:
		return TriggerTargetAbove
	case fx.candidate != nil:
		return TriggerMemberLost
	case fx.hold == "" && fx.target.Members < fx.current:
		return TriggerTargetBelow
	}
	return TriggerNone
}
