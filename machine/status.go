package machine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/render"
)

// Condition reasons.
const (
	ReasonConverged       = "Converged"
	ReasonMembersNotReady = "MembersNotReady"
	ReasonInProgress      = "InProgress"
	ReasonIdle            = "Idle"
	ReasonHealthy         = "Healthy"
	ReasonBucketReserved  = "BucketReserved"
	ReasonBound           = "Bound"
	ReasonPending         = "Pending"
	ReasonMemberLost      = "MemberCannotComeBack"
	// ReasonMemberUnreachable: a member's node is NotReady or unreachable past the grace period
	// and not fenced; only fencing the node lets the member be replaced.
	ReasonMemberUnreachable  = "MemberUnreachable"
	ReasonDeleting           = "Deleting"
	ReasonMetricsUnavailable = "MetricsUnavailable"
	// The reasons of a hold: an input problem that forbids touching the workload.
	ReasonSpecRefused           = "SpecRefused"
	ReasonStorageClassMissing   = "StorageClassMissing"
	ReasonServiceAccountMissing = "ServiceAccountMissing"
	ReasonPriorityClassMissing  = "PriorityClassMissing"
	ReasonNameTaken             = "NameTaken"
	ReasonForeignDisks          = "ForeignDisks"
	// ReasonMemberStuck: a member has not been ready for the grace period, and replacing it would
	// bring back the same template (an image that never starts, a request no node can meet).
	ReasonMemberStuck = "MemberStuck"
	// ReasonDiskLost: a running member's disk is being deleted, not by the operator, or is Lost.
	ReasonDiskLost            = "DiskLost"
	ConditionCapacityObserved = "CapacityObserved"
	// ReasonReservedNames: spec.pod names what the operator sets itself (SettingsOverridden).
	ReasonReservedNames = "ReservedNames"
)

// status is a function of the view and this step's decision alone; the status the fleet carries
// is read only to keep a condition's lastTransitionTime when its status did not change.
func (p *planner) status() v1alpha1.CelldFleetStatus {
	v, fx := p.v, p.fx
	f := v.Fleet
	st := v1alpha1.CelldFleetStatus{
		ObservedGeneration: f.Generation,
		State:              p.to,
		Members: v1alpha1.MemberCounts{
			Desired: fx.target.Members, Current: fx.current, Ready: fx.ready, Updated: v.Workload.UpdatedReplicas,
		},
		RecommendedMembers: fx.target.Recommended,
		Selector:           render.Selector(f),
		BlockedBy:          p.blocked,
		NextAction:         p.next,
	}
	if p.to != v1alpha1.StateDeleting {
		st.Rollout = p.rolloutStatus()
	}
	held := st.Rollout != nil && st.Rollout.Held
	if p.to == v1alpha1.StateDeleting {
		st.Members.Desired = 0
	}
	if len(fx.unused) > 0 || len(fx.foreign) > 0 {
		st.Disks = &v1alpha1.DiskAudit{Unused: fx.unused, Foreign: fx.foreign}
	}
	if p.to != v1alpha1.StateDeleting {
		p.diskStatus(&st)
	}
	refused := fx.refused
	// A held spec (Degraded) is not Ready: the workload runs, but not what the spec asks for.
	converged := p.to == v1alpha1.StateSteady && fx.settled() && fx.current == fx.target.Members && fx.hold == "" && len(p.mutations()) == 0 && !held

	cond := func(t string, ok bool, reason, msg string) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: f.Generation}
	}
	ready := cond(v1alpha1.ConditionReady, converged, ReasonConverged, "every member is ready at the requested size")
	if !converged {
		ready.Reason, ready.Message = ReasonMembersNotReady, orText(p.blocked, "the fleet is converging")
	}
	if held && !refused && fx.hold == "" {
		ready.Reason, ready.Message = ReasonRolloutHeld, "waiting for "+p.heldText()
	}
	waiting := "the fleet is converging"
	if p.blocked != "" {
		waiting = "waiting for " + p.blocked
	}
	stuck := ""
	w := &v.Workload
	if m := fx.stuck; m != nil && p.to != v1alpha1.StateDeleting && canary(f) > 0 && int32(m.Ordinal) < w.Partition &&
		w.UpdateRevision != w.CurrentRevision && m.Revision == w.CurrentRevision {
		// What the person already did (a new template) is held back from it by the staged
		// rollout, whose canaries the StatefulSet will not update while it is not ready.
		stuck = fmt.Sprintf("member %s has not been ready for %s (spec.healing.unreachableGracePeriod) on the current template, and the rollout of "+
			"revision %s holds it there (spec.rollout.canary %d): approve the rollout to let the new template reach it, kubectl celld rollout approve %s "+
			"(annotation %s=%s), or see why with kubectl describe pod %s",
			m.Name, gracePeriod(f), w.UpdateRevision, canary(f), v.Name, v1alpha1.AnnotationRolloutApproved, w.UpdateRevision, m.Name)
	} else if m != nil && p.to != v1alpha1.StateDeleting {
		stuck = fmt.Sprintf("member %s has not been ready for %s (spec.healing.unreachableGracePeriod) and replacing it would bring back the same template: "+
			"see why with kubectl describe pod %s (image, resources, scheduling), then fix spec.image or spec.resources; the other members are kept as they are",
			m.Name, gracePeriod(f), m.Name)
	}
	progressing := cond(v1alpha1.ConditionProgressing, !converged && !refused && fx.hold == "" && stuck == "", ReasonInProgress, orText(p.next, waiting))
	switch {
	case converged || refused || fx.hold != "":
		progressing.Reason, progressing.Message = ReasonIdle, "no change in progress"
	case held && len(p.mutations()) == 0:
		// Nothing moves until a person approves or reverts: a scale step or a heal would say so.
		progressing.Status, progressing.Reason, progressing.Message = metav1.ConditionFalse, ReasonRolloutHeld, "no progress until a person approves: "+p.heldText()
	case stuck != "":
		progressing.Reason, progressing.Message = ReasonMemberStuck, "no progress: "+stuck
	case len(fx.lostClaims) > 0 && p.to != v1alpha1.StateDeleting:
		progressing.Status, progressing.Reason, progressing.Message = metav1.ConditionFalse, ReasonDiskLost,
			"no progress until a person deletes the Lost claims "+strings.Join(fx.lostClaims, ", ")
	case fx.candidate != nil && !fx.othersReady && fx.wait == 0 && p.to != v1alpha1.StateDeleting && !sleeping(p.to):
		// Nothing the operator waits for ends on its own: only a person replacing the member does.
		progressing.Status, progressing.Reason, progressing.Message = metav1.ConditionFalse, ReasonMemberLost, "no progress: "+p.blocked
	case len(fx.away) > 0 && fx.awayWaits() && p.to != v1alpha1.StateDeleting:
		// Only a person ends it, by uncordoning a node: no progress until then.
		progressing.Status, progressing.Reason, progressing.Message = metav1.ConditionFalse, ReasonWaitingForNode, "no progress until a node is uncordoned: "+fx.awayText()
	case len(fx.away) > 0 && p.to != v1alpha1.StateDeleting:
		progressing.Reason, progressing.Message = ReasonMemberEvicted, fx.awayText()
	case p.scaleDown != "" && len(fx.unfenced) == 0:
		progressing.Status, progressing.Reason, progressing.Message = metav1.ConditionFalse, ReasonDeletionBlocked, "no progress until a person deletes the member: "+p.scaleDown
	case len(fx.unfenced) > 0 && p.to == v1alpha1.StateSteady:
		progressing.Status, progressing.Reason, progressing.Message = metav1.ConditionFalse, ReasonMemberUnreachable, "no progress until the node is fenced: "+fx.fenceText()
	}
	degraded := cond(v1alpha1.ConditionDegraded, false, ReasonHealthy, "no problem the operator cannot fix on its own")
	switch {
	case refused:
		degraded = cond(v1alpha1.ConditionDegraded, true, ReasonBucketReserved, p.blocked)
	case fx.hold != "":
		degraded = cond(v1alpha1.ConditionDegraded, true, fx.holdReason, fx.hold)
	case len(fx.unfenced) > 0:
		degraded = cond(v1alpha1.ConditionDegraded, true, ReasonMemberUnreachable, fx.fenceText())
	case p.scaleDown != "":
		degraded = cond(v1alpha1.ConditionDegraded, true, ReasonDeletionBlocked, p.scaleDown)
	case fx.candidate != nil && !fx.othersReady && !sleeping(p.to):
		// A fleet going to sleep waits on no member coming back: the stop takes them all.
		degraded = cond(v1alpha1.ConditionDegraded, true, ReasonMemberLost, p.blocked)
	case len(fx.doomed) > 0 && p.to != v1alpha1.StateDeleting:
		msg := "disks " + joinNames(fx.doomed) +
			" are being deleted or lost, not by the operator: a member keeps its disk while it runs, then starts again on a new, empty one; " +
			"copy off what must be kept now, nothing brings a deleted disk back"
		if len(fx.lostClaims) > 0 {
			msg += "; a Lost claim never binds again and its member cannot start on it, nor on a new Pod: run kubectl delete pvc " +
				strings.Join(fx.lostClaims, " ") + " and the member starts again on a new, empty disk"
		}
		degraded = cond(v1alpha1.ConditionDegraded, true, ReasonDiskLost, msg)
	case stuck != "":
		degraded = cond(v1alpha1.ConditionDegraded, true, ReasonMemberStuck, stuck)
	case fx.disks.noExpansion && p.to != v1alpha1.StateDeleting:
		degraded = cond(v1alpha1.ConditionDegraded, true, ReasonStorageClassNotExpandable, fx.disks.classText(v))
	}
	bound := cond(v1alpha1.ConditionReservationBound, v.Reservation.Exists && !refused, ReasonBound, "the bucket is reserved to this fleet by CelldReservation "+v.Reservation.Name)
	switch {
	case refused:
		bound.Reason, bound.Message = ReasonBucketReserved, p.blocked
	case !v.Reservation.Exists:
		bound.Reason, bound.Message = ReasonPending, "the reservation of bucket "+f.Spec.Bucket.Name+" is being created"
	}
	st.Conditions = p.hibernationConditions([]metav1.Condition{ready, progressing, degraded, bound}, cond)
	if c := p.capacityCondition(cond); c != nil {
		st.Conditions = append(st.Conditions, *c)
	}
	if p.to != v1alpha1.StateDeleting {
		if c := p.resizingCondition(cond); c != nil {
			st.Conditions = append(st.Conditions, *c)
		}
	}
	if names := render.Overridden(f); len(names) > 0 {
		st.Conditions = append(st.Conditions, cond(v1alpha1.ConditionSettingsOverridden, true, ReasonReservedNames,
			strings.Join(names, ", ")+": the operator sets these itself and keeps its own values; remove them from spec.pod, or rename them (CELLD_ variables and celld.io/ keys are the operator's)"))
	}
	// Keep the transition time of a condition whose status did not change, so an unchanged fleet
	// writes nothing.
	for i := range st.Conditions {
		stampTransition(&st.Conditions[i], v.Now, f.Status.Conditions)
	}
	return st
}

// stampTransition gives c the transition time of the published condition of its type when that
// one has the same status, and now otherwise: the time says when the status last changed, and a
// condition that changed only its reason or message keeps it.
func stampTransition(c *metav1.Condition, now time.Time, published []metav1.Condition) {
	c.LastTransitionTime = metav1.NewTime(now.UTC().Truncate(time.Second))
	for _, old := range published {
		if old.Type == c.Type && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
}

func orText(s, alt string) string {
	if s != "" {
		return s
	}
	return alt
}

// mutations are the actions of this step that write something other than status and events, but
// for the apply that only records a finished rollout's size: the fleet it finishes is converged.
func (p *planner) mutations() []Action {
	var out []Action
	for _, a := range p.actions {
		if a.Kind != RecordEvent && a.Kind != PublishStatus && a.Kind != Requeue && a.Key != p.recordsSettled {
			out = append(out, a)
		}
	}
	return out
}

// statusEqual compares two statuses, ignoring when conditions last changed.
func statusEqual(a, b *v1alpha1.CelldFleetStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.State != b.State || a.Members != b.Members || a.Selector != b.Selector ||
		a.BlockedBy != b.BlockedBy || a.NextAction != b.NextAction || !rolloutEqual(a.Rollout, b.Rollout) {
		return false
	}
	if (a.RecommendedMembers == nil) != (b.RecommendedMembers == nil) ||
		(a.RecommendedMembers != nil && *a.RecommendedMembers != *b.RecommendedMembers) {
		return false
	}
	if (a.Disks == nil) != (b.Disks == nil) ||
		(a.Disks != nil && (!slices.Equal(a.Disks.Unused, b.Disks.Unused) || !slices.Equal(a.Disks.Foreign, b.Disks.Foreign) ||
			a.Disks.Size != b.Disks.Size || !slices.Equal(a.Disks.Claims, b.Disks.Claims) || !slices.Equal(a.Disks.Larger, b.Disks.Larger))) {
		return false
	}
	return slices.EqualFunc(a.Conditions, b.Conditions, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.ObservedGeneration == y.ObservedGeneration &&
			x.Message == y.Message
	})
}

// ReaderActs reports whether st changes what a reader of published acts on rather than what it
// watches go by: the state, the generation observed (a rollout tool waits for its spec to be
// seen), or a condition's type, status or reason. A fleet that arrives (Ready=True) is one. A
// driver that writes statuses apart from the syncs sends these first.
func ReaderActs(published, st *v1alpha1.CelldFleetStatus) bool {
	if published == nil || published.State != st.State || published.ObservedGeneration != st.ObservedGeneration ||
		len(published.Conditions) != len(st.Conditions) {
		return true
	}
	for i := range st.Conditions {
		a, b := &published.Conditions[i], &st.Conditions[i]
		if a.Type != b.Type || a.Status != b.Status || a.Reason != b.Reason {
			return true
		}
	}
	return false
}

// ProgressInterval is the least time between two writes of one fleet's status. A fleet in motion
// changes its status with every member event; its readers (a person, kubectl wait, an
// autoscaler reading the scale subresource) are served as well by the latest status once per
// interval as by every one, and an API server with thousands of fleets in motion is served
// better.
var ProgressInterval = 10 * time.Second

// statusHold is how long the status st must wait before it replaces the one fleet f shows: a
// deletion's first interval (deletionHold), a new fleet's first interval (creationHold), or else
// what is left of the interval since the last write this machine asked for, whatever changed
// (the latest status is written then). Zero when the fleet is Ready, so a fleet that arrives is
// reported at once and no settled fleet carries a deferred status; on this machine's first write
// to a fleet that shows a status (an operator that restarted: it does not know when the last
// write was); and when the fleet does not show the last status asked for: that write failed or
// was never sent (an earlier action of its step failed), or someone else wrote the status since,
// and what the fleet shows is no status of this machine's to pace.
func (m *Fleet) statusHold(f *v1alpha1.CelldFleet, st *v1alpha1.CelldFleetStatus, now time.Time) time.Duration {
	if hold := deletionHold(f, st, now); hold > 0 {
		return hold
	}
	if apimeta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady) {
		return 0
	}
	if hold := creationHold(f, st, now); hold > 0 {
		return hold
	}
	if m.asked == nil || !statusEqual(m.asked, &f.Status) {
		return 0
	}
	since := now.Sub(m.published)
	if since >= ProgressInterval {
		return 0
	}
	if since < 0 {
		// A clock that went back waits one interval at most.
		return ProgressInterval
	}
	return ProgressInterval - since
}

// deletionHold is how long the status of a fleet being deleted waits before its first write:
// what is left of one interval since the deletion was requested. A deletion that nothing holds up
// (members that stop, disks that go) ends within it, and the fleet is gone with no status written
// that no one would read; one that is held up is written once the interval ends, and says what it
// waits for. The deletion's own timestamp times it, so a restarted operator holds it alike. A
// timestamp ahead of this clock cannot be timed, and holds nothing.
func deletionHold(f *v1alpha1.CelldFleet, st *v1alpha1.CelldFleetStatus, now time.Time) time.Duration {
	if st.State != v1alpha1.StateDeleting || f.DeletionTimestamp == nil {
		return 0
	}
	return intervalLeft(f.DeletionTimestamp.Time, now)
}

// intervalLeft is what is left of one interval from t, which this clock cannot time (zero) when
// t is ahead of it.
func intervalLeft(t, now time.Time) time.Duration {
	left := t.Add(ProgressInterval).Sub(now)
	if left > ProgressInterval {
		return 0
	}
	return max(left, 0)
}

// creationHold is how long the first status of a new fleet waits: what is left of one interval
// since the fleet was created. A fleet that arrives within it (Ready) is written once, arrived,
// with no Provisioning status before it that no one would read; one that takes longer is written
// when the interval ends, and then as any fleet in motion. A fleet that shows any status was
// written before (by this operator or an earlier one) and holds nothing. Degraded is never held:
// a new fleet refused its bucket or its names tells its tenant at once what to change. The
// fleet's creationTimestamp times it, so a restarted operator holds it alike; a timestamp ahead
// of this clock cannot be timed, and holds nothing.
func creationHold(f *v1alpha1.CelldFleet, st *v1alpha1.CelldFleetStatus, now time.Time) time.Duration {
	if f.CreationTimestamp.IsZero() || !statusEqual(&f.Status, &v1alpha1.CelldFleetStatus{}) ||
		apimeta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDegraded) {
		return 0
	}
	return intervalLeft(f.CreationTimestamp.Time, now)
}

// enteredDegraded is the Degraded condition of st when it says something the published status
// does not: the fleet became Degraded, or is Degraded for another reason. That is when a person
// is told with a Warning Event, sent with the PublishStatus that makes the next pass quiet: a
// status held back would tell it again on every pass until written.
func enteredDegraded(st, published *v1alpha1.CelldFleetStatus) (metav1.Condition, bool) {
	cur := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
	if cur == nil || cur.Status != metav1.ConditionTrue {
		return metav1.Condition{}, false
	}
	old := apimeta.FindStatusCondition(published.Conditions, v1alpha1.ConditionDegraded)
	if old != nil && old.Status == metav1.ConditionTrue && old.Reason == cur.Reason {
		return metav1.Condition{}, false
	}
	return *cur, true
}
