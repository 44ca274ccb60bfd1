package machine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

// planner turns a decided state into actions, level-driven: every action compares what should be
// with what is observed, and none is emitted for what already holds.
type planner struct {
	m        *Fleet
	v        *events.View
	fx       *facts
	observed v1alpha1.FleetState
	to       v1alpha1.FleetState
	// settledNow is the size to record as settled on the workload.
	settledNow int32
	actions    []Action
	blocked    string
	next       string
	// scaleDown is the member the StatefulSet controller will never remove while the fleet is
	// being deleted, said as what to do ("" when none).
	scaleDown string
	// recordsSettled is the key of a workload apply that only records the settled size of a
	// rollout that finished: the fleet is converged with it, and says so in the same step.
	recordsSettled string
	// fs is the v1alpha1.AnnotationFilesystemResize the members' template gets this step.
	fs string
	// part is the StatefulSet's partition this step (rollout.go), 0 when nothing is staged.
	part int32
}

// onlyRecordsSettled: the workload apply at this size differs from the observed workload only
// in the settled size it records, the rollout's end and nothing else.
func (p *planner) onlyRecordsSettled(o kinds.Object, replicas int32) bool {
	v := p.v
	if replicas != p.fx.current || p.settledNow == v.Workload.Settled || !v.Workload.Exists {
		return false
	}
	w := p.m.render(v, p.fs, replicas, v.Workload.Settled, p.part).Workload()
	return kinds.RefOf(w) == kinds.RefOf(o) && p.m.matches(v, w, p.fs, replicas, v.Workload.Settled, p.part)
}

func (p *planner) add(a Action) {
	if a.Ref.Kind == "" {
		// Finalizers, status, events and requeues are about the fleet itself.
		a.Ref.Kind = kinds.Fleet
	}
	if a.Namespace == "" {
		a.Namespace = p.v.Namespace
	}
	if a.Name == "" {
		a.Name = p.v.Name
	}
	p.actions = append(p.actions, a)
}

// reservedElsewhere is the refusal of a bucket another namespace's fleet holds or claims first. It
// lands in the fleet's status and Events, which the tenant reads: the holder's namespace, name and
// UID belong to another tenant, so only the cluster administrator, who reads every namespace's
// reservations, is pointed at. Reserved and merely claimed read alike, so the tenant cannot tell
// a running fleet from a waiting one either.
const reservedElsewhere = "bucket %s is reserved to a fleet in another namespace: choose another bucket, or ask the cluster administrator (who can see which fleet holds it, and release it by deleting its CelldReservation once the bucket may be reused)"

// block records the first thing the fleet waits for.
func (p *planner) block(format string, args ...any) {
	if p.blocked == "" {
		p.blocked = fmt.Sprintf(format, args...)
	}
}

func (p *planner) intend(format string, args ...any) {
	if p.next == "" {
		p.next = fmt.Sprintf(format, args...)
	}
}

func (p *planner) plan(transitions []Transition) ([]Action, v1alpha1.CelldFleetStatus) {
	v := p.v
	switch r := &v.Reservation; {
	case p.to == v1alpha1.StateDeleting:
		p.deleting()
	case p.fx.refused && r.Exists && r.BoundNamespace != v.Namespace:
		p.block(reservedElsewhere, v.Fleet.Spec.Bucket.Name)
	case p.fx.refused && r.Exists:
		p.block("bucket %s is reserved to fleet %s/%s (uid %s) by CelldReservation %s/%s: choose another bucket, or delete that reservation once the bucket may be reused",
			v.Fleet.Spec.Bucket.Name, r.BoundNamespace, r.BoundName, r.BoundTo, r.BoundNamespace, r.Name)
	case p.fx.refused && r.Claimant.Namespace != v.Namespace:
		p.block(reservedElsewhere, v.Fleet.Spec.Bucket.Name)
	case p.fx.refused:
		p.block("bucket %s is not reserved right now, but fleet %s/%s (uid %s) names it too and has the stronger claim (it was bound to it, or is older): that fleet binds it, this one waits; choose another bucket",
			v.Fleet.Spec.Bucket.Name, r.Claimant.Namespace, r.Claimant.Name, r.Claimant.UID)
	default:
		p.live()
	}
	if from, to, ok := p.startsChange(transitions); ok {
		var why []string
		for _, t := range transitions {
			why = append(why, triggerText(t.Trigger))
		}
		msg := fmt.Sprintf("%s -> %s (%s)", from, to, strings.Join(why, ", "))
		switch to {
		case v1alpha1.StateGrowing:
			msg += fmt.Sprintf(": %d -> %d members in one step", p.fx.current, p.fx.target.Members)
		case v1alpha1.StateShrinkingOne:
			msg += fmt.Sprintf(": %d -> %d members, one at a time", p.fx.current, p.fx.target.Members)
		case v1alpha1.StateSteady:
			msg += fmt.Sprintf(": %d members", p.fx.current)
		}
		p.add(Action{Kind: RecordEvent, Key: "event/state/" + string(from) + "-" + string(to), EventType: "Normal",
			Reason: "StateChanged", Message: msg})
	}
	st := p.status()
	var hold time.Duration
	told := false
	if !statusEqual(&st, &v.Fleet.Status) {
		if hold = p.m.statusHold(v.Fleet, &st, v.Now); hold == 0 {
			if d, ok := enteredDegraded(&st, &v.Fleet.Status); ok {
				p.add(Action{Kind: RecordEvent, Key: "event/degraded/" + d.Reason, EventType: "Warning", Reason: d.Reason, Message: d.Message})
			}
			for _, e := range hibernationEvents(&st, &v.Fleet.Status, v.Name) {
				p.add(e)
			}
			for _, e := range rolloutEvents(&st, &v.Fleet.Status, v.Name) {
				p.add(e)
			}
			if e, ok := resizeEvent(&v.Fleet.Status, &p.fx.disks, p.m.resizing, p.m.resized); ok {
				p.add(e)
				told = true
			}
			s := st
			p.add(Action{Kind: PublishStatus, Key: "status/" + v.Key(), Status: &s})
		}
	}
	if e, ok := resizeEvent(&v1alpha1.CelldFleetStatus{}, &p.fx.disks, p.m.resizing, p.m.resized); ok && !told && p.to != v1alpha1.StateDeleting {
		// A resize this machine announced ended with no status to carry the news: told alone.
		p.add(e)
	}
	if wait := p.requeue(); wait > 0 {
		p.add(Action{Kind: Requeue, Key: "requeue/" + v.Key(), After: wait})
	}
	if hold > 0 {
		// A held status waits out the interval; the sync it asks for writes whatever it then
		// observes. Its own key: it is about the status, never about what the fleet does.
		p.add(Action{Kind: Requeue, Key: StatusRequeuePrefix + v.Key(), After: hold})
	}
	return p.actions, st
}

// startsChange says whether a step's transitions start a change, and which: one Normal Event
// per change, when it starts, and one when a new fleet first becomes Steady. A change's end is
// the status's to say (its state, Ready's lastTransitionTime); an Event for it too would double
// the Events a lifecycle writes for nothing a reader acts on. A scale-in is one change however
// many steps it takes: a step that resumes it after a pause in Steady (a member that was not
// ready yet) starts nothing, as the history shows a step already taken under the standing
// request.
func (p *planner) startsChange(transitions []Transition) (from, to v1alpha1.FleetState, ok bool) {
	n := len(transitions)
	if n == 0 {
		return "", "", false
	}
	from, to = transitions[0].From, transitions[n-1].To
	switch {
	case from == to:
		return from, to, false
	case sleeping(from) || sleeping(to) || from == v1alpha1.StateWaking || to == v1alpha1.StateWaking:
		// Hibernation's Events follow its status (hibernationEvents): its steps are derived
		// again on every pass, and an Event per pass would repeat itself.
		return from, to, false
	case to == v1alpha1.StateSteady:
		return from, to, from == v1alpha1.StateProvisioning
	case to == v1alpha1.StateShrinkingOne && from == v1alpha1.StateSteady:
		for _, r := range p.fx.plan.Records {
			if r.Kind == v1alpha1.DecisionScaleInRequested {
				return from, to, true
			}
		}
		// Under a standing request, the ShrinkOne steps taken end the history.
		h := p.v.Reservation.History
		return from, to, len(h) == 0 || h[len(h)-1].Kind != v1alpha1.DecisionShrinkOne
	}
	return from, to, true
}

// StatusRequeuePrefix starts the key of the requeue that a status held back for the progress
// interval asks for.
const StatusRequeuePrefix = "requeue/status/"

// paused plans a fleet under AnnotationPaused: its status, which says so and what the fleet
// would do, and nothing else. The state is what the observation shows; no trigger fires.
func (p *planner) paused() ([]Action, v1alpha1.CelldFleetStatus) {
	f := p.v.Fleet
	p.block("reconciliation paused by annotation %s=%q: nothing but this status is written until it is removed (kubectl celld resume %s, or kubectl annotate celldfleet %s %s-)",
		v1alpha1.AnnotationPaused, f.Annotations[v1alpha1.AnnotationPaused], f.Name, f.Name, v1alpha1.AnnotationPaused)
	st := p.status()
	st.NextAction = ""
	for i := range st.Conditions {
		if c := &st.Conditions[i]; c.Type == v1alpha1.ConditionProgressing && c.Status == metav1.ConditionTrue {
			// Whatever was in flight goes on in the workload's controller, but the operator
			// starts nothing.
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, "ReconciliationPaused", "the operator starts no change while the fleet is paused"
			stampTransition(c, p.v.Now, f.Status.Conditions)
		}
	}
	st.Conditions = append(st.Conditions, metav1.Condition{Type: v1alpha1.ConditionReconciliationPaused, Status: metav1.ConditionTrue,
		Reason: "Paused", Message: p.blocked, ObservedGeneration: f.Generation})
	stampTransition(&st.Conditions[len(st.Conditions)-1], p.v.Now, f.Status.Conditions)
	if statusEqual(&st, &f.Status) {
		return nil, st
	}
	s := st
	return []Action{{Kind: PublishStatus, Key: "status/" + p.v.Key(), Ref: kinds.Ref{Kind: kinds.Fleet, Namespace: p.v.Namespace, Name: p.v.Name}, Status: &s}}, st
}

func triggerText(t Trigger) string {
	if t == TriggerNone {
		return "observed"
	}
	return string(t)
}

// live plans a fleet that is not being deleted.
func (p *planner) live() {
	v, fx := p.v, p.fx
	f := v.Fleet
	// A refused spec holds the reservation too: the API server refused it or another object
	// rendered from this generation, and asking again would only repeat the refusal.
	if !v.Reservation.Exists && v.Refused == nil && !fx.isTaken("CelldReservation/"+render.ReservationName(f.Spec.Bucket)) {
		r := render.RenderReservation(f)
		p.add(Action{Kind: BindReservation, Key: "bind/" + f.Namespace + "/" + r.Name + "/" + string(f.UID), Ref: kinds.Ref{Kind: kinds.Reservation, Name: r.Name}, Object: r})
		p.intend("bind bucket %s to this fleet", f.Spec.Bucket.Name)
	}
	if !v.HasFinalizer {
		p.add(Action{Kind: AddFinalizer, Key: "finalizer/add/" + v.Key()})
	}
	replicas := fx.current
	switch p.to {
	case v1alpha1.StateProvisioning, v1alpha1.StateGrowing, v1alpha1.StateShrinkingOne, v1alpha1.StateWaking:
		replicas = fx.plan.Next
	}
	if fx.hold != "" {
		replicas = fx.current
	}
	p.fs = p.filesystemResize()
	objs := p.m.render(v, p.fs, replicas, p.settledNow, 0)
	markBudget(objs, p.mark())
	if sleeping(p.to) {
		p.sleep(objs)
		return
	}
	if p.part = p.partition(replicas, objs.StatefulSet); p.part != 0 {
		render.SetPartition(objs.StatefulSet, p.part)
	}
	for _, o := range objs.All() {
		workload := kinds.IsWorkload(o)
		ref := kinds.RefOf(o)
		if ((workload || v.Refused != nil) && fx.hold != "") || fx.isTaken(ref.String()) {
			p.block("%s", fx.hold)
			continue
		}
		if workload && v.Workload.Deleting && v.Asleep {
			// The workload a hibernation stopped is still going: the wake creates it anew once
			// it is gone, never over a StatefulSet whose members are being stopped.
			p.block("the stopped workload to be gone before the fleet wakes")
			continue
		}
		if p.m.matches(v, o, p.fs, replicas, p.settledNow, p.part) && !p.remark(o) {
			continue
		}
		a := Action{Kind: Apply, Key: applyKey(o, replicas), Ref: ref, Object: o}
		if workload && p.onlyRecordsSettled(o, replicas) {
			p.recordsSettled = a.Key
		}
		if workload {
			// The size written is only right for the fleet's spec and the workload as seen: a
			// cache behind either could raise past the target or lower by more than one.
			w := &v.Workload
			a.Premise = &Premise{Fleet: f.Name, FleetGeneration: f.Generation, Workload: true, WorkloadExists: w.Exists, WorkloadGeneration: w.Generation}
			if replicas < fx.current {
				// A scale-in takes a member away: every member must still be ready, and the last
				// change rolled out.
				a.Premise.Ready, a.Premise.Nodes = p.readyMembers(""), p.memberNodes()
				a.Premise.RolledOut, a.Premise.Uncordoned = true, true
			}
		}
		p.add(a)
	}
	p.history(replicas)
	// A fleet with a member it cannot replace yet says why, in whatever state it waits.
	if p.to == v1alpha1.StateHealing || (fx.candidate != nil && !fx.othersReady) {
		p.heal(kinds.RefOf(objs.Workload()))
	}
	p.explain(replicas)
	// Last: what the disks wait for never hides what the members wait for.
	p.disks()
}

// cannotHeal says why a member that cannot come back is not replaced, and what a person may do:
// the operator replaces a member only while every other one is ready, but a person who knows the
// others are down for good (or are held back by this very member, as an ordered StatefulSet
// holds the members above a stuck one) may replace it by hand.
func (p *planner) cannotHeal(c *lost) string {
	var others []string
	for i := range p.v.Members {
		if m := &p.v.Members[i]; m != c.member && !memberReady(p.v, m) {
			others = append(others, m.Name)
		}
	}
	down := "members are missing"
	switch len(others) {
	case 0:
	case 1:
		down = "member " + others[0] + " is not ready"
	default:
		down = "members " + joinNames(others) + " are not ready"
	}
	back := "a new member takes its place"
	switch {
	case c.reason == HealVolumeLost:
		back = "it comes back under the same name, on a new, empty disk: its own is lost"
	case c.member.Ordinal >= 0:
		back = "it comes back under the same name, on its own disk"
	}
	return fmt.Sprintf("member %s cannot come back on its own (%s) and %s: the operator replaces a member only while all the others are ready, "+
		"so that it never takes two away at once; to replace it anyway, run kubectl delete pod %s (%s)",
		c.member.Name, c.reason, down, c.member.Name, back)
}

// readyMembers names the fleet's members but one.
func (p *planner) readyMembers(except string) []string {
	out := make([]string, 0, len(p.v.Members))
	for i := range p.v.Members {
		if n := p.v.Members[i].Name; n != except {
			out = append(out, n)
		}
	}
	return out
}

// memberNodes are the nodes the view shows the members on, each once, in order.
func (p *planner) memberNodes() []string {
	var out []string
	for i := range p.v.Members {
		if n := p.v.Members[i].NodeName; n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// history appends the policy's decisions that this step acts on.
func (p *planner) history(replicas int32) {
	fx := p.fx
	var records []v1alpha1.CapacityDecision
	key := "history/" + string(p.v.Fleet.UID)
	for _, r := range fx.plan.Records {
		switch r.Kind {
		case v1alpha1.DecisionGrow:
			if replicas <= fx.current {
				continue
			}
		case v1alpha1.DecisionShrinkOne:
			if replicas >= fx.current {
				continue
			}
		}
		records = append(records, r)
		key += fmt.Sprintf("/%s/%d-%d", r.Kind, r.From, r.To)
	}
	if len(records) == 0 {
		return
	}
	name, ns := render.ReservationName(p.v.Fleet.Spec.Bucket), p.v.Namespace
	if p.v.Reservation.Exists {
		name, ns = p.v.Reservation.Name, p.v.Reservation.BoundNamespace
	}
	// One write for the step: a scale-in request and its first step go together.
	p.add(Action{Kind: AppendHistory, Key: key, Ref: kinds.Ref{Kind: kinds.Reservation, Namespace: ns, Name: name}, Decisions: records})
}

// heal deletes the one member that cannot come back, with a UID precondition, once every other
// member is ready. workload is the fleet's, which the heal's premise reads.
func (p *planner) heal(workload kinds.Ref) {
	c := p.fx.candidate
	if c == nil {
		return
	}
	if !p.fx.othersReady {
		p.block("%s", p.cannotHeal(c))
		return
	}
	m := c.member
	// The fleet as decided on: a deletion requested since (it moves the generation on) or a new
	// spec must be decided on first.
	// The workload as decided on, too: a cache behind a change written since (a grow applied by
	// the step before) would show a workload settled that its controller has yet to act on.
	w := &p.v.Workload
	premise := &Premise{Ready: p.readyMembers(m.Name), Nodes: p.memberNodes(), OnlyNotReady: m.Name, Fleet: p.v.Fleet.Name, FleetGeneration: p.v.Fleet.Generation,
		Workload: true, WorkloadExists: w.Exists, WorkloadGeneration: w.Generation, WorkloadRef: workload}
	switch c.reason {
	case HealNodeGone, HealNodeFenced, HealNodeUnreachable, HealStuckTerminating:
		// The node's state is the whole reason: it must still hold when the delete goes out.
		_, gone, since := nodeHealth(p.v, m.NodeName)
		premise.Node, premise.NodeGone, premise.NodeUnhealthySince = m.NodeName, gone, since
		premise.NodeFenced = !gone && nodeFenced(p.v, m.NodeName)
	case HealVolumeLost:
		premise.Claim = m.ClaimName
	}
	p.add(Action{Kind: DeletePod, Key: "heal/" + p.v.Namespace + "/" + m.Name + "/" + string(m.UID), Ref: kinds.Ref{Kind: kinds.Pod, Name: m.Name},
		UID: m.UID, ResourceVersion: m.ResourceVersion, Force: c.force, Reason: string(c.reason), Premise: premise})
	p.add(Action{Kind: RecordEvent, Key: "event/heal/" + m.Name + "/" + string(m.UID), EventType: "Warning", Reason: "Healing",
		Message: fmt.Sprintf("replacing member %s: %s", m.Name, c.reason)})
	p.intend("replace member %s (%s)", m.Name, c.reason)
}

// deleting stops the workload, waits for every member Pod to be gone, deletes the fleet's own
// disks (PersistentFleet only), waits for them to be gone, then lets the fleet go. A fleet that
// goes with its CustomResourceDefinition (an uninstall) keeps its disks: it lets the fleet go at
// once and says what it kept.
func (p *planner) deleting() {
	v := p.v
	f := v.Fleet
	if v.Uninstalling {
		p.uninstalling()
		return
	}
	if (v.Workload.Exists && v.Workload.Replicas != 0) || (!v.Workload.Exists && orphans(v) > 0) {
		// Members a StatefulSet left when it was deleted to be created again have no controller
		// to stop them: the workload is created again at no member, which adopts and stops them.
		w := p.m.render(v, p.fx.disks.fsKept, 0, v.Workload.Settled, 0).Workload()
		p.add(Action{Kind: Apply, Key: applyKey(w, 0), Ref: kinds.RefOf(w), Object: w})
	}
	if n := len(v.Members); n > 0 {
		if len(p.fx.unfenced) > 0 {
			p.block("%s", p.fx.fenceText())
		}
		if b := blockedScaleDown(v); b != nil {
			p.scaleDown = b.text(v)
			p.block("%s", p.scaleDown)
		}
		p.block("%d member Pods to terminate before the fleet's disks are deleted", n)
		p.intend("stop the workload and wait for its members to be gone")
		return
	}
	if f.Spec.Profile == v1alpha1.ProfilePersistentFleet {
		own := 0
		var deleting []Action
		for _, d := range v.Disks {
			if !ownDisk(f, &d) {
				continue
			}
			own++
			if d.Terminating {
				continue
			}
			deleting = append(deleting, Action{Kind: DeleteDisk, Key: "disk/" + v.Namespace + "/" + d.Name + "/" + string(d.UID), Ref: kinds.Ref{Kind: kinds.PersistentVolumeClaim, Name: d.Name}, UID: d.UID, ResourceVersion: d.ResourceVersion,
				Premise: &Premise{NoMembers: true, DiskOf: f.UID, DiskUID: d.UID}})
		}
		var names []string
		for _, a := range deleting {
			if !p.m.announced[a.UID] {
				names = append(names, a.Name)
			}
		}
		if len(names) > 0 {
			// One Event per step names every disk it is about to delete that no earlier step
			// named, ahead of the deletes: a delete that fails stops the step, and none that went
			// out before it goes unsaid. It is the step's first write (no member is left, so the
			// workload is stopped already).
			key := "event/disks/" + strings.Join(names, ",")
			p.add(Action{Kind: RecordEvent, Key: key, EventType: "Normal", Reason: "DiskDeleted",
				Message: fmt.Sprintf("deleting %s of the deleted fleet", diskNames(names))})
			uids := make([]types.UID, 0, len(deleting))
			for _, a := range deleting {
				uids = append(uids, a.UID)
			}
			p.m.announcing = map[string][]types.UID{key: uids}
		}
		for _, a := range deleting {
			p.add(a)
		}
		if own > 0 {
			p.block("%d of the fleet's disks to be deleted", own)
			p.intend("delete the fleet's own disks")
			return
		}
	}
	if v.HasFinalizer {
		p.add(Action{Kind: RemoveFinalizer, Key: "finalizer/remove/" + v.Key()})
		p.intend("remove the finalizer; the reservation stays")
	}
}

// ownDisk: the claim is one the fleet's StatefulSet made, by its exact name (ClaimName) and the
// fleet's UID label. Only such a claim is ever deleted, and only with its UID and
// resourceVersion as preconditions, so a claim relabelled or replaced since it was seen is not.
func ownDisk(f *v1alpha1.CelldFleet, d *events.Disk) bool {
	return d.FleetUID == f.UID && d.Ordinal >= 0 && d.Name == kinds.ClaimName(f.Name, d.Ordinal)
}

// uninstalling lets a fleet go with its CustomResourceDefinition without touching its disks:
// uninstalling the operator never deletes data. The workload goes with the fleet (the garbage
// collector follows its owner reference); the claims, which the StatefulSet retains, stay.
func (p *planner) uninstalling() {
	v := p.v
	if !v.HasFinalizer {
		return
	}
	var kept []string
	for _, d := range v.Disks {
		if ownDisk(v.Fleet, &d) && !d.Terminating {
			kept = append(kept, d.Name)
		}
	}
	msg := "the CelldFleet CustomResourceDefinition is being deleted: the fleet goes with it, and the operator deletes none of its disks"
	if len(kept) > 0 {
		msg += "; kept: " + joinNames(kept)
	}
	p.add(Action{Kind: RecordEvent, Key: "event/uninstall/" + string(v.Fleet.UID), EventType: "Warning", Reason: "DisksKept", Message: msg})
	p.add(Action{Kind: RemoveFinalizer, Key: "finalizer/remove/" + v.Key()})
	p.intend("remove the finalizer and keep the fleet's disks (uninstall)")
}

// explain fills blockedBy and nextAction for a live fleet.
func (p *planner) explain(replicas int32) {
	v, fx := p.v, p.fx
	if replicas != fx.current {
		p.intend("set the workload to %d members", replicas)
	}
	if fx.plan.Blocked != "" && fx.target.Members < fx.current {
		p.block("%s", fx.plan.Blocked)
	}
	if len(fx.unfenced) > 0 {
		p.block("%s", fx.fenceText())
	}
	if len(fx.lostClaims) > 0 {
		p.block("a person to delete the Lost claims %s (kubectl delete pvc %s)", joinNames(fx.lostClaims), strings.Join(fx.lostClaims, " "))
	}
	if len(fx.away) > 0 {
		p.block("%s", fx.awayText())
	}
	p.evictedEvents()
	for i := range v.Members {
		if m := &v.Members[i]; !memberReady(v, m) {
			p.block("member %s to be ready", m.Name)
			break
		}
	}
	if !fx.rolledOut && v.Workload.Exists {
		p.block("the workload's rollout to finish")
	}
	if p.held() {
		p.block("%s", p.heldText())
	}
}

// requeue is when time alone changes a decision: a grace period or a stabilization window ends.
func (p *planner) requeue() time.Duration {
	wait := p.fx.wait
	if w := p.fx.plan.Wait; w > 0 && (wait == 0 || w < wait) {
		wait = w
	}
	return wait
}

// applyKey is stable for the same object at the same size: a workload's key carries its
// replicas, so a resize is a new effect and a repeat of one is not.
func applyKey(o kinds.Object, replicas int32) string {
	ref := kinds.RefOf(o)
	if kinds.IsWorkload(o) {
		return fmt.Sprintf("apply/%s/%s/%s/replicas=%d", ref.Kind, ref.Namespace, ref.Name, replicas)
	}
	return "apply/" + string(ref.Kind) + "/" + ref.Name
}

// diskNames says "disk a" or "disks a, b and c".
func diskNames(names []string) string {
	if len(names) == 1 {
		return "disk " + names[0]
	}
	return "disks " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
