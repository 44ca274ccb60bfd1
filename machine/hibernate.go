package machine

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

// Condition reasons of hibernation (spec.hibernate).
const (
	ReasonHibernating = "Hibernating"
	ReasonHibernated  = "Hibernated"
	ReasonWaking      = "Waking"
)

// The Events of hibernation, each told with the status that first shows it.
const (
	HibernatingEventKey = "event/hibernation/started"
	HibernatedEventKey  = "event/hibernation/done"
	WakingEventKey      = "event/wake/started"
	WokenEventKey       = "event/wake/done"
)

// asleepState is the state of a fleet the operator stopped for spec.hibernate (its budget is
// marked): Waking once the workload was created again for a wake; Hibernated once the mark
// records that the operator saw every member stopped, and nothing runs; Hibernating otherwise.
// A workload still going (deleted, its members terminating) is the stop's, whatever the spec
// now asks.
func asleepState(v *events.View) v1alpha1.FleetState {
	w := &v.Workload
	switch {
	case !v.Fleet.Spec.Hibernate && w.Exists && !w.Deleting:
		return v1alpha1.StateWaking
	case v.AsleepStopped && !w.Exists && len(v.Members) == 0:
		return v1alpha1.StateHibernated
	}
	return v1alpha1.StateHibernating
}

// stopped: no workload and no member Pod is left, terminating or not: every member has stopped
// and let go of its disk.
func (fx *facts) stopped() bool {
	return !fx.view.Workload.Exists && len(fx.view.Members) == 0
}

// sleeping: the step's state keeps the fleet without a workload.
func sleeping(s v1alpha1.FleetState) bool {
	return s == v1alpha1.StateHibernating || s == v1alpha1.StateHibernated
}

// mark is the kinds.AnnotationHibernated the fleet's budget carries after this step, "" for
// none: from the step that starts the stop until the step that sees every member ready again,
// "stopped" from the step that sees the stop done until the wake creates the workload again.
func (p *planner) mark() string {
	v := p.v
	switch {
	case p.to == v1alpha1.StateHibernated || (v.AsleepStopped && p.to == v1alpha1.StateWaking && !v.Workload.Exists):
		return kinds.HibernatedStopped
	case sleeping(p.to) || (v.Asleep && p.to != v1alpha1.StateSteady):
		return kinds.HibernatedStopping
	}
	return ""
}

// observedMark is the mark the budget carries as observed.
func observedMark(v *events.View) string {
	switch {
	case v.AsleepStopped:
		return kinds.HibernatedStopped
	case v.Asleep:
		return kinds.HibernatedStopping
	}
	return ""
}

// markBudget sets or leaves out the hibernation mark on the rendered budget.
func markBudget(objs *render.Objects, mark string) {
	if mark == "" {
		return
	}
	for _, o := range objs.Owned {
		if kinds.Of(o) != kinds.PodDisruptionBudget {
			continue
		}
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[kinds.AnnotationHibernated] = mark
		o.SetAnnotations(a)
	}
}

// remark: o is the budget and its mark differs from the observed one. The drift comparison sees
// only what the operator sets (a subset), so a mark to take off must be applied explicitly.
func (p *planner) remark(o kinds.Object) bool {
	return kinds.Of(o) == kinds.PodDisruptionBudget && p.mark() != observedMark(p.v)
}

// sleep plans a fleet that hibernates: the objects it keeps (the budget marked first, so a
// restart from here on derives the hibernation), then the workload deleted with background
// propagation. The garbage collector stops every member at once; the claims have no owner and
// stay, as do the reservation, the Services and the policies.
func (p *planner) sleep(objs *render.Objects) {
	v, fx := p.v, p.fx
	f := v.Fleet
	marking := false
	for _, o := range objs.Owned {
		ref := kinds.RefOf(o)
		if (v.Refused != nil && fx.hold != "") || fx.isTaken(ref.String()) {
			p.block("%s", fx.hold)
			continue
		}
		if p.m.matches(v, o, p.fs, fx.current, v.Workload.Settled, 0) && !p.remark(o) {
			continue
		}
		a := Action{Kind: Apply, Key: applyKey(o, fx.current), Ref: ref, Object: o}
		if kinds.Of(o) == kinds.PodDisruptionBudget {
			marking = true
			// The mark is the hibernation's first write: decided on a cache that has not seen
			// the fleet deleted since (its CRD with it, an uninstall), it must not be sent.
			a.Premise = &Premise{Fleet: f.Name, FleetGeneration: f.Generation}
		}
		p.add(a)
	}
	w := &v.Workload
	switch {
	case w.Exists && !w.Deleting && fx.hold != "":
		// What holds the workload where it is (a bad input, another fleet's disks under this
		// one's names) holds its stop too: a person fixes it first.
		p.block("%s", fx.hold)
	case w.Exists && !w.Deleting && (v.Asleep || marking):
		ref := kinds.RefOf(objs.Workload())
		p.add(Action{Kind: StopWorkload, Key: "stop/" + v.Namespace + "/" + ref.Name + "/" + string(w.UID), Ref: ref,
			UID: w.UID, ResourceVersion: w.ResourceVersion, Premise: &Premise{Fleet: f.Name, FleetGeneration: f.Generation}})
		p.intend("stop every member at once (delete the %s, keep the disks)", ref.Kind)
	case w.Exists && !w.Deleting:
		// Without the mark on the budget, a restart could not tell this stop from a lost
		// workload: the stop waits for it.
		p.block("the mark on PodDisruptionBudget %s that records the hibernation", f.Name)
	case !w.Exists && fx.orphaned && fx.hold != "":
		p.block("%s", fx.hold)
	case !w.Exists && fx.orphaned && orphansOnly(v):
		// The StatefulSet was deleted with propagation Orphan (a new claim template) and its
		// members still run, owned by nothing: nothing would ever stop them. It is created
		// again over them, at their number, and the next pass stops it with them. Members that
		// still name their StatefulSet are the stop's own, which the garbage collector deletes.
		o := objs.Workload()
		ref := kinds.RefOf(o)
		p.add(Action{Kind: Apply, Key: applyKey(o, fx.current), Ref: ref, Object: o,
			Premise: &Premise{Fleet: f.Name, FleetGeneration: f.Generation, Workload: true}})
		p.intend("create the %s again over its %d running members, to stop them", ref.Kind, fx.current)
	}
	if !fx.stopped() {
		p.block("%d member Pods to stop", len(v.Members))
	}
}

// hibernationConditions says in Ready, Progressing and the Hibernated condition that the fleet
// sleeps, is on its way to sleep, or wakes. Degraded keeps saying what only a person can fix.
func (p *planner) hibernationConditions(conds []metav1.Condition, cond func(string, bool, string, string) metav1.Condition) []metav1.Condition {
	name := p.v.Name
	var ready, progressing, hibernated metav1.Condition
	switch p.to {
	case v1alpha1.StateHibernating:
		msg := "spec.hibernate: stopping every member at once; the disks, the reservation and the bucket are kept"
		if p.blocked != "" {
			msg += "; waiting for " + p.blocked
		}
		ready = cond(v1alpha1.ConditionReady, false, ReasonHibernating, msg)
		progressing = cond(v1alpha1.ConditionProgressing, true, ReasonHibernating, msg)
		hibernated = cond(v1alpha1.ConditionHibernated, false, ReasonHibernating, msg)
	case v1alpha1.StateHibernated:
		msg := fmt.Sprintf("the fleet sleeps (spec.hibernate): no member runs; its disks, reservation, bucket and size (%d members) are kept; wake it with kubectl celld wake %s",
			p.v.Fleet.Spec.Members, name)
		ready = cond(v1alpha1.ConditionReady, false, ReasonHibernated, msg)
		progressing = cond(v1alpha1.ConditionProgressing, false, ReasonHibernated, "nothing moves until the fleet is woken")
		hibernated = cond(v1alpha1.ConditionHibernated, true, ReasonHibernated, msg)
	default:
		if !p.v.Asleep || p.to == v1alpha1.StateSteady || p.to == v1alpha1.StateDeleting {
			return conds
		}
		msg := fmt.Sprintf("waking at %d members on the disks kept", p.fx.target.Members)
		if p.blocked != "" {
			msg += "; waiting for " + p.blocked
		}
		ready = cond(v1alpha1.ConditionReady, false, ReasonWaking, msg)
		progressing = cond(v1alpha1.ConditionProgressing, true, ReasonWaking, msg)
		hibernated = cond(v1alpha1.ConditionHibernated, false, ReasonWaking, msg)
	}
	for i := range conds {
		switch conds[i].Type {
		case v1alpha1.ConditionReady:
			conds[i] = ready
		case v1alpha1.ConditionProgressing:
			if conds[i].Status == metav1.ConditionTrue || p.to == v1alpha1.StateHibernated {
				// A Progressing that says no progress (a member stuck) keeps saying it.
				conds[i] = progressing
			}
		}
	}
	return append(conds, hibernated)
}

// hibernationEvents are the Events of hibernation, told with the status that first shows the
// news: the stop started and done, the wake started and done.
func hibernationEvents(st, published *v1alpha1.CelldFleetStatus, name string) []Action {
	cur, old := st.State, published.State
	if cur == old {
		return nil
	}
	ev := func(key, reason, msg string) []Action {
		return []Action{{Kind: RecordEvent, Key: key, EventType: "Normal", Reason: reason, Message: msg}}
	}
	started := ev(HibernatingEventKey, "Hibernating", fmt.Sprintf("spec.hibernate: stopping all %d members at once; disks, reservation and bucket are kept", st.Members.Current))
	waking := ev(WakingEventKey, "Waking", fmt.Sprintf("waking at %d members on the disks kept", st.Members.Desired))
	// A status held back by the progress interval may skip a state (a stop done within it goes
	// from Steady to Hibernated): the Event of the state skipped is told with the next.
	switch {
	case cur == v1alpha1.StateHibernating && old != v1alpha1.StateHibernated:
		return started
	case cur == v1alpha1.StateHibernated && old != v1alpha1.StateHibernating:
		return append(started, ev(HibernatedEventKey, "Hibernated", "every member stopped; the fleet sleeps until kubectl celld wake "+name)...)
	case cur == v1alpha1.StateHibernated:
		return ev(HibernatedEventKey, "Hibernated", "every member stopped; the fleet sleeps until kubectl celld wake "+name)
	case cur == v1alpha1.StateWaking:
		return waking
	case cur == v1alpha1.StateSteady && old == v1alpha1.StateWaking:
		return ev(WokenEventKey, "Woken", fmt.Sprintf("every member is ready again: %d members", st.Members.Ready))
	case cur == v1alpha1.StateSteady && sleeping(old):
		return append(waking, ev(WokenEventKey, "Woken", fmt.Sprintf("every member is ready again: %d members", st.Members.Ready))...)
	}
	return nil
}

// orphansOnly: every member not terminating has no controller.
func orphansOnly(v *events.View) bool {
	for i := range v.Members {
		if m := &v.Members[i]; !m.Terminating && !m.Orphan {
			return false
		}
	}
	return true
}
