package machine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/qmuntal/stateless"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// Trigger is what an observation calls for.
type Trigger string

// The triggers. The observation trigger (RolledOut) says an in-flight change finished; request
// triggers say what the fleet asks for now.
const (
	TriggerNone              Trigger = ""
	TriggerDeletionRequested Trigger = "DeletionRequested"
	TriggerProvisioned       Trigger = "Provisioned"
	TriggerTargetAbove       Trigger = "TargetAboveCurrent"
	TriggerTargetBelow       Trigger = "TargetBelowCurrent"
	TriggerMemberLost        Trigger = "MemberCannotComeBack"
	TriggerRolledOut         Trigger = "RolledOut"
	TriggerHibernate         Trigger = "HibernationRequested"
	TriggerStopped           Trigger = "MembersStopped"
	TriggerWake              Trigger = "WakeRequested"
)

// States lists the nine lifecycle states.
var States = []v1alpha1.FleetState{
	v1alpha1.StateProvisioning, v1alpha1.StateSteady, v1alpha1.StateGrowing,
	v1alpha1.StateShrinkingOne, v1alpha1.StateHealing, v1alpha1.StateDeleting,
	v1alpha1.StateHibernating, v1alpha1.StateHibernated, v1alpha1.StateWaking,
}

// Guards are named pure predicates over the step's facts, declared as functions so that their
// names appear in the exported diagram.
func previousChangeRolledOutOrHeldAndAllReady(_ context.Context, args ...any) bool {
	return args[0].(*facts).settled()
}

func scaleInAllowedByPolicy(_ context.Context, args ...any) bool {
	fx := args[0].(*facts)
	return fx.plan.Next < fx.current
}

func onlyThatMemberNotReady(_ context.Context, args ...any) bool {
	fx := args[0].(*facts)
	return fx.candidate != nil && fx.othersReady
}

func noWorkloadNorMemberLeft(_ context.Context, args ...any) bool {
	return args[0].(*facts).stopped()
}

type guard struct {
	name string
	fn   stateless.GuardFunc
}

var (
	settledAndReady = guard{"previousChangeRolledOutOrHeldAndAllReady", previousChangeRolledOutOrHeldAndAllReady}
	scaleInAllowed  = guard{"scaleInAllowedByPolicy", scaleInAllowedByPolicy}
	othersReady     = guard{"onlyThatMemberNotReady", onlyThatMemberNotReady}
	allStopped      = guard{"noWorkloadNorMemberLeft", noWorkloadNorMemberLeft}
)

// transition is one row of the lifecycle table: the stateless configuration, the diagram and the
// documentation are all built from these rows.
type transition struct {
	from, to v1alpha1.FleetState
	trigger  Trigger
	guard    *guard
}

// table is the lifecycle machine.
var table = func() []transition {
	var t []transition
	add := func(from v1alpha1.FleetState, tr Trigger, to v1alpha1.FleetState, g *guard) {
		t = append(t, transition{from: from, to: to, trigger: tr, guard: g})
	}
	// Healing is one decision, never a state a step starts from (see derive): it has no row out.
	for _, s := range States {
		if s != v1alpha1.StateDeleting && s != v1alpha1.StateHealing {
			add(s, TriggerDeletionRequested, v1alpha1.StateDeleting, nil)
		}
	}
	add(v1alpha1.StateProvisioning, TriggerProvisioned, v1alpha1.StateSteady, &settledAndReady)
	add(v1alpha1.StateProvisioning, TriggerMemberLost, v1alpha1.StateHealing, &othersReady)
	add(v1alpha1.StateSteady, TriggerTargetAbove, v1alpha1.StateGrowing, nil)
	add(v1alpha1.StateSteady, TriggerMemberLost, v1alpha1.StateHealing, &othersReady)
	add(v1alpha1.StateSteady, TriggerTargetBelow, v1alpha1.StateShrinkingOne, &scaleInAllowed)
	add(v1alpha1.StateGrowing, TriggerRolledOut, v1alpha1.StateSteady, &settledAndReady)
	add(v1alpha1.StateGrowing, TriggerMemberLost, v1alpha1.StateHealing, &othersReady)
	add(v1alpha1.StateShrinkingOne, TriggerRolledOut, v1alpha1.StateSteady, &settledAndReady)
	add(v1alpha1.StateShrinkingOne, TriggerTargetAbove, v1alpha1.StateGrowing, nil)
	add(v1alpha1.StateShrinkingOne, TriggerMemberLost, v1alpha1.StateHealing, &othersReady)
	// Hibernation stops every member at once, whatever is in flight: a person asked for the
	// whole fleet to stop, so no change in flight is worth finishing first. A waking fleet asked
	// to sleep again is observed Hibernating (its budget is still marked): no row from Waking.
	for _, s := range []v1alpha1.FleetState{v1alpha1.StateProvisioning, v1alpha1.StateSteady, v1alpha1.StateGrowing,
		v1alpha1.StateShrinkingOne} {
		add(s, TriggerHibernate, v1alpha1.StateHibernating, nil)
	}
	add(v1alpha1.StateHibernating, TriggerStopped, v1alpha1.StateHibernated, &allStopped)
	add(v1alpha1.StateHibernating, TriggerWake, v1alpha1.StateWaking, nil)
	add(v1alpha1.StateHibernated, TriggerWake, v1alpha1.StateWaking, nil)
	add(v1alpha1.StateWaking, TriggerRolledOut, v1alpha1.StateSteady, &settledAndReady)
	add(v1alpha1.StateWaking, TriggerMemberLost, v1alpha1.StateHealing, &othersReady)
	return t
}()

// reentries are triggers a state takes again without leaving it: the effect is re-emitted
// (idempotently) with the newest view.
var reentries = []transition{
	{from: v1alpha1.StateGrowing, trigger: TriggerTargetAbove},
}

// ignores are triggers a state waits out: a lower target while a change is in flight is decided
// once that change rolled out. Any other trigger without a row is a hole in the table.
var ignores = []transition{
	{from: v1alpha1.StateGrowing, trigger: TriggerTargetBelow},
	{from: v1alpha1.StateShrinkingOne, trigger: TriggerTargetBelow},
}

// newStateMachine configures stateless over the state held in *state. Guards read the facts the
// trigger is fired with.
func newStateMachine(state *v1alpha1.FleetState) *stateless.StateMachine {
	sm := stateless.NewStateMachineWithExternalStorage(
		func(context.Context) (stateless.State, error) { return *state, nil },
		func(_ context.Context, s stateless.State) error { *state = s.(v1alpha1.FleetState); return nil },
		stateless.FiringQueued)
	wrap := func(g *guard) []stateless.GuardFunc {
		if g == nil {
			return nil
		}
		return []stateless.GuardFunc{g.fn}
	}
	for _, s := range States {
		sm.Configure(s)
	}
	for _, t := range table {
		sm.Configure(t.from).Permit(t.trigger, t.to, wrap(t.guard)...)
	}
	for _, t := range reentries {
		sm.Configure(t.from).PermitReentry(t.trigger, wrap(t.guard)...)
	}
	for _, t := range ignores {
		sm.Configure(t.from).Ignore(t.trigger)
	}
	return sm
}

// DOT exports the lifecycle machine, as the operator runs it, in Graphviz DOT.
func DOT() string {
	var s v1alpha1.FleetState = v1alpha1.StateProvisioning
	return newStateMachine(&s).ToGraph()
}

// Mermaid exports the lifecycle machine as a Mermaid state diagram, from the same table.
func Mermaid() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	fmt.Fprintf(&b, "    [*] --> %s\n", v1alpha1.StateProvisioning)
	rows := append(append([]transition{}, table...), reentries...)
	lines := make([]string, 0, len(rows))
	for _, t := range rows {
		to := t.to
		if to == "" {
			to = t.from
		}
		label := string(t.trigger)
		if t.guard != nil {
			label += " [" + t.guard.name + "]"
		}
		lines = append(lines, fmt.Sprintf("    %s --> %s : %s", t.from, to, label))
	}
	sort.Strings(lines)
	for _, l := range lines {
		b.WriteString(l)
		b.WriteString("\n")
	}
	for _, t := range ignores {
		fmt.Fprintf(&b, "    note right of %s : ignores %s\n", t.from, t.trigger)
	}
	fmt.Fprintf(&b, "    note right of %s : one decision, deletes that one Pod; the next step starts from what the workload shows\n", v1alpha1.StateHealing)
	fmt.Fprintf(&b, "    %s --> [*] : finalizer removed\n", v1alpha1.StateDeleting)
	return b.String()
}
