package machine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/capacity"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

// HealReason says why a member cannot come back on its own.
type HealReason string

// The heal reasons.
const (
	// HealNodeGone: the member's node no longer exists.
	HealNodeGone HealReason = "NodeGone"
	// HealNodeUnreachable: the member's node is NotReady or unreachable past the grace period.
	// Its Pod is force-deleted only once the node is fenced; before that, only a member without
	// an identity of its own (a Deployment's) is replaced, by a graceful delete.
	HealNodeUnreachable HealReason = "NodeUnreachable"
	// HealNodeFenced: the member's node carries the out-of-service taint: whoever set it says the
	// machine no longer runs anything, so its Pods may go without waiting for a kubelet.
	HealNodeFenced HealReason = "NodeFenced"
	// HealStuckTerminating: the member is terminating on a node that is gone or fenced, so no
	// kubelet will ever finish its deletion.
	HealStuckTerminating HealReason = "StuckTerminating"
	// HealBrokenRollout: the member is not ready on an old revision while the workload's update
	// revision moved on; the StatefulSet controller waits for it forever (kubernetes#67250).
	HealBrokenRollout HealReason = "BrokenRollout"
	// HealVolumeLost: the member's disk is gone, lost or being deleted, so it cannot start.
	HealVolumeLost HealReason = "VolumeLost"
)

// DefaultGracePeriod is healing's grace period when the fleet's spec carries none.
const DefaultGracePeriod = 5 * time.Minute

// lost is a member that cannot come back on its own.
type lost struct {
	member *events.Member
	reason HealReason
	// force: only a Pod whose node is gone or fenced is deleted without a grace period. A node
	// that is only NotReady or unreachable may be partitioned and alive, still running the
	// member: forcing its Pod away lets a second copy of the member start elsewhere.
	force bool
}

// unfenced is a member on a node NotReady or unreachable past the grace period that nobody has
// declared dead: the operator cannot tell a partition from a dead machine, so it replaces no
// member with an identity there, and says how to fence the node.
type unfenced struct {
	member *events.Member
	node   string
	since  time.Time
}

// facts are what the view says, computed once per step.
type facts struct {
	view      *events.View
	current   int32
	ready     int32
	running   int32 // members not terminating
	rolledOut bool
	allReady  bool
	// maintenance says which member's node is cordoned, empty when none: a scale-in waits.
	maintenance string
	// candidate is the first member that cannot come back; nil when none.
	candidate *lost
	lostCount int
	// othersReady: every member but the candidate is ready and none is missing.
	othersReady bool
	// wait is how long until a member not yet counted lost would be (0 when none).
	wait   time.Duration
	target capacity.Target
	plan   capacity.Plan
	// refused: the bucket is bound to another fleet, or, with no reservation, another fleet has
	// the stronger claim to it. The fleet then gets nothing: no finalizer, no object.
	refused bool
	// hold names an input problem that forbids touching the workload; empty when none.
	hold       string
	holdReason string
	foreign    []string
	unused     []string
	// taken names (Kind/name) what the fleet would create that exists and is not its own.
	taken []string
	// stuck is a member not ready for the grace period that healing does not replace: a new Pod
	// would come back from the same template and fail the same way. nil when none.
	stuck *events.Member
	// doomed names the disks of running members that are going away (deleted by hand, or lost)
	// while their members still hold them.
	doomed []string
	// lostClaims names the claims that are Lost and not being deleted: their members cannot
	// start on them, and a new Pod would mount the same claim, so only deleting it helps.
	lostClaims []string
	// unfenced are the members that only fencing their nodes can replace.
	unfenced []unfenced
	// disks are the fleet's claims against spec.storage.size.
	disks diskFacts
	// orphaned: the StatefulSet is gone and members it left are running (its size is theirs).
	orphaned bool
	// away are the members node maintenance takes or holds away (maintenance.go).
	away []away
}

func gracePeriod(f *v1alpha1.CelldFleet) time.Duration {
	if g := f.Spec.Healing.UnreachableGracePeriod; g != nil {
		return g.Duration
	}
	return DefaultGracePeriod
}

func stabilization(f *v1alpha1.CelldFleet) time.Duration {
	if w := f.Spec.Capacity.ScaleInStabilization; w != nil {
		return w.Duration
	}
	return capacity.DefaultStabilization
}

// nodeHealth says whether a node is usable and, if not, since when it is not.
func nodeHealth(v *events.View, name string) (healthy, gone bool, since time.Time) {
	if name == "" || !v.NodesSynced {
		return true, false, time.Time{}
	}
	n, ok := v.Nodes[name]
	if !ok {
		return false, true, time.Time{}
	}
	return n.Ready, false, n.UnhealthySince
}

// nodeFenced says whether a node that still exists carries the out-of-service taint.
func nodeFenced(v *events.View, name string) bool {
	if name == "" || !v.NodesSynced {
		return false
	}
	n, ok := v.Nodes[name]
	return ok && n.Fenced
}

func memberReady(v *events.View, m *events.Member) bool {
	if !m.Ready || m.Terminating {
		return false
	}
	healthy, _, _ := nodeHealth(v, m.NodeName)
	return healthy
}

// disk is the claim of that name. Normalize sorts the claims by name, so it is found in
// O(log claims) for each member rather than by a walk of them all; a view built unsorted by hand
// is walked when the search misses.
func (fx *facts) disk(name string) *events.Disk {
	ds := fx.view.Disks
	if i, ok := slices.BinarySearchFunc(ds, name, func(d events.Disk, n string) int { return strings.Compare(d.Name, n) }); ok {
		return &ds[i]
	}
	for i := range ds {
		if ds[i].Name == name {
			return &ds[i]
		}
	}
	return nil
}

// onLostClaim: the member's claim is Lost and nobody is deleting it.
func (fx *facts) onLostClaim(m *events.Member) bool {
	if m.ClaimName == "" {
		return false
	}
	d := fx.disk(m.ClaimName)
	return d != nil && d.Lost && !d.Terminating
}

// classify says whether a member cannot come back on its own, and if it may soon, in how long.
func (fx *facts) classify(m *events.Member, grace time.Duration) (*lost, time.Duration) {
	v := fx.view
	healthy, gone, since := nodeHealth(v, m.NodeName)
	if gone {
		r := HealNodeGone
		if m.Terminating {
			r = HealStuckTerminating
		}
		return &lost{member: m, reason: r, force: true}, 0
	}
	if !healthy {
		if nodeFenced(v, m.NodeName) {
			// Fencing is the word of whoever powered the machine off: no grace period to wait.
			r := HealNodeFenced
			if m.Terminating {
				r = HealStuckTerminating
			}
			return &lost{member: m, reason: r, force: true}, 0
		}
		if left := since.Add(grace).Sub(v.Now); left > 0 {
			return nil, left
		}
		if m.Terminating || render.UsesStatefulSet(&v.Fleet.Spec) {
			// A StatefulSet brings the member back under the same name and disk only once its Pod
			// object is gone, and only a force-delete removes it from a node that does not answer:
			// that is the second copy fencing exists to prevent. A Deployment's terminating Pod
			// was replaced already.
			fx.unfenced = append(fx.unfenced, unfenced{member: m, node: m.NodeName, since: since})
			return nil, 0
		}
		// A Deployment's member has no identity to share: a graceful delete is enough for its
		// ReplicaSet to start another, and the old one stops once its kubelet hears of it.
		return &lost{member: m, reason: HealNodeUnreachable}, 0
	}
	if m.Terminating || m.Ready {
		return nil, 0
	}
	if m.ClaimName != "" {
		// A claim missing from the view may only lag its Pod (separate watches): it counts as lost
		// once the member has been not ready for the grace period.
		if d := fx.disk(m.ClaimName); d == nil || d.Lost || d.Terminating {
			if d != nil && d.Lost && !d.Terminating {
				// The StatefulSet gives a new Pod this same claim, which never binds again:
				// replacing the member changes nothing until someone deletes the claim, and the
				// fleet says so (DiskLost).
				return nil, 0
			}
			if left := m.NotReadySince.Add(grace).Sub(v.Now); left > 0 {
				return nil, left
			}
			return &lost{member: m, reason: HealVolumeLost}, 0
		}
	}
	w := &v.Workload
	// Replaced, the member comes back on the update revision, or below a held partition on the
	// current one: only when that is not the revision it runs does replacing it change anything.
	// A member held on the current revision would come back the same and, while it recovers for
	// longer than the grace period, be replaced again and again.
	back := w.UpdateRevision
	if int32(m.Ordinal) < w.Partition {
		back = w.CurrentRevision
	}
	if m.Ordinal >= 0 && back != "" && m.Revision != "" && m.Revision != back {
		if left := m.NotReadySince.Add(grace).Sub(v.Now); left > 0 {
			return nil, left
		}
		return &lost{member: m, reason: HealBrokenRollout}, 0
	}
	return nil, 0
}

func computeFacts(v *events.View) *facts {
	fx := &facts{view: v}
	f := v.Fleet
	w := &v.Workload
	if w.Exists {
		fx.current = w.Replicas
	} else if n := orphans(v); n > 0 && !v.Deleting {
		fx.current, fx.orphaned = n, true
	}
	grace := gracePeriod(f)
	fx.allReady = true
	for i := range v.Members {
		m := &v.Members[i]
		if !m.Terminating {
			fx.running++
		}
		if memberReady(v, m) {
			fx.ready++
		} else {
			fx.allReady = false
		}
		unfenced := len(fx.unfenced)
		l, wait := fx.classify(m, grace)
		if a, ok := fx.awayOf(m); ok {
			fx.away = append(fx.away, a)
		}
		if l == nil && wait == 0 && len(fx.unfenced) == unfenced && !m.Ready && !m.Terminating && !fx.onLostClaim(m) && !fx.isAway(m) {
			// Not ready, and nothing healing can do about it: after the grace period the fleet
			// says so, instead of waiting in silence. A member healing waits on (its node's
			// grace, a broken rollout's) is not stuck: the fleet names one that is.
			if left := m.NotReadySince.Add(grace).Sub(v.Now); left > 0 {
				wait = left
			} else if fx.stuck == nil {
				fx.stuck = m
			}
		}
		if wait > 0 && (fx.wait == 0 || wait < fx.wait) {
			fx.wait = wait
		}
		if l != nil {
			fx.lostCount++
			if fx.candidate == nil {
				fx.candidate = l
			}
		}
		if m.ClaimName != "" && !m.Terminating {
			if d := fx.disk(m.ClaimName); d != nil && (d.Terminating || d.Lost) {
				fx.doomed = append(fx.doomed, d.Name+" (member "+m.Name+")")
			}
			if fx.onLostClaim(m) {
				fx.lostClaims = append(fx.lostClaims, m.ClaimName)
			}
		}
	}
	// A staged rollout held at its partition is settled there (RolledOut), once every member from
	// the partition up runs the update revision: members say so one by one, where the workload's
	// counts alone could not tell which members are updated. So is a StatefulSet created anew
	// over members on an earlier template (HeldOverOthers): only its members show it holds.
	fx.rolledOut = (w.RolledOut() || w.HeldOverOthers()) && fx.running == w.Replicas && int32(len(v.Members)) == w.Replicas &&
		(w.UpdatedReplicas == w.Replicas || updatedFromPartition(v))
	if c := fx.candidate; c != nil {
		// The previous change must have been acted on: the controller saw it, and no member above
		// the size is left. A rollout may still be stuck on this very member: that is the trap
		// healing exists for.
		fx.othersReady = fx.lostCount == 1 && w.ObservedGeneration >= w.Generation && w.StatusReplicas <= w.Replicas &&
			(int32(len(v.Members)) >= w.Replicas || missingOnlyAbove(v, c.member))
		for i := range v.Members {
			if m := &v.Members[i]; m != c.member && !memberReady(v, m) {
				fx.othersReady = false
			}
		}
	}
	r := &v.Reservation
	fx.refused = (r.Exists && r.BoundTo != f.UID) || (!r.Exists && r.Claimant != nil)
	fx.audit()
	fx.taken = fx.nameTaken()
	fx.inputs()
	fx.disks = computeDisks(v)
	if w := fx.disks.fsWait; w > 0 && (fx.wait == 0 || w < fx.wait) {
		fx.wait = w
	}
	fx.target = capacity.TargetFor(&f.Spec, v.Utilization, fx.current)
	if f.Spec.Hibernate {
		// A sleeping fleet wakes to the size it was asked for: no recommendation sizes it.
		fx.target = capacity.Target{Members: f.Spec.Members, Source: v1alpha1.SourceManual}
	}
	fx.maintenance = cordonedMember(v)
	fx.plan = capacity.Step(capacity.Facts{
		Current: fx.current, Target: fx.target, Settled: fx.settled(), Maintenance: fx.maintenance, Now: v.Now,
		Window: stabilization(f), History: v.Reservation.History,
	})
	return fx
}

// missingOnlyAbove: every member the workload's size calls for and the view lacks has an ordinal
// above the given StatefulSet member's. An ordered StatefulSet creates no member above one that
// is not ready, so while it stays stuck on that member (a broken rollout met by a growth), the
// missing ones are a consequence of it, not other members down: replacing it takes nothing ready
// away, and waiting for them would wait forever.
func missingOnlyAbove(v *events.View, m *events.Member) bool {
	if m.Ordinal < 0 {
		return false
	}
	present := map[int]bool{}
	for i := range v.Members {
		present[v.Members[i].Ordinal] = true
	}
	for ord := 0; ord < int(v.Workload.Replicas); ord++ {
		if !present[ord] && ord < m.Ordinal {
			return false
		}
	}
	return true
}

// updatedFromPartition: every member at an ordinal from the workload's partition up runs its
// update revision.
func updatedFromPartition(v *events.View) bool {
	w := &v.Workload
	for i := range v.Members {
		if m := &v.Members[i]; m.Ordinal >= int(w.Partition) && m.Revision != w.UpdateRevision {
			return false
		}
	}
	return true
}

// settled: the previous change rolled out and every member is ready.
func (fx *facts) settled() bool { return fx.rolledOut && fx.allReady }

// audit finds the disks no member uses and the disks of another fleet under this one's name.
func (fx *facts) audit() {
	v := fx.view
	size := fx.current
	if v.Asleep || v.Fleet.Spec.Hibernate {
		// A sleeping fleet's disks wait for its members to wake on them: none is unused that
		// the size it wakes to will mount.
		size = max(size, v.Fleet.Spec.Members)
	}
	for _, d := range v.Disks {
		switch {
		case d.FleetUID != v.Fleet.UID:
			fx.foreign = append(fx.foreign, d.Name)
		case d.Ordinal >= 0 && d.Ordinal >= int(size) && !d.Terminating:
			fx.unused = append(fx.unused, d.Name)
		}
	}
}

// inputs finds what only the operator can see is wrong with the fleet's input. Any of it holds
// the workload where it is: the last good workload keeps running, nothing is created into it.
func (fx *facts) inputs() {
	v := fx.view
	switch {
	case v.Refused != nil:
		fx.holdReason = ReasonSpecRefused
		fx.hold = "the API server refused " + v.Refused.Object + " as rendered from this spec: " + v.Refused.Message + "; fix the fleet's spec"
	case v.StorageClassMissing:
		fx.holdReason = ReasonStorageClassMissing
		fx.hold = "storage class " + v.Fleet.Spec.Storage.StorageClassName + " does not exist: create it, or recreate the fleet with spec.storage.storageClassName naming one that does"
	case v.ServiceAccountMissing:
		fx.holdReason = ReasonServiceAccountMissing
		fx.hold = "service account " + v.Fleet.Spec.ServiceAccountName + " does not exist: create it (it carries the members' IAM role) or fix spec.serviceAccountName"
	case v.PriorityClassMissing:
		fx.holdReason = ReasonPriorityClassMissing
		fx.hold = "priority class " + v.Fleet.Spec.Pod.PriorityClassName + " does not exist, and a member Pod naming it cannot be created: create it, or fix spec.pod.priorityClassName; the members run as they are until then"
	case len(fx.taken) > 0:
		fx.holdReason = ReasonNameTaken
		what := " exists and does not belong to this fleet: the operator never takes it over; delete or rename it"
		if len(fx.taken) > 1 {
			what = " exist and do not belong to this fleet: the operator never takes them over; delete or rename them"
		}
		fx.hold = joinNames(fx.taken) + what + ", or give the fleet another name"
	case len(fx.foreign) > 0 && v.Fleet.Spec.Profile == v1alpha1.ProfilePersistentFleet:
		fx.holdReason = ReasonForeignDisks
		fx.hold = "disks " + joinNames(fx.foreign) + " carry this fleet's name but not its UID label (another fleet's, or none): the operator never adopts them; delete or relabel them"
	}
}

// nameTaken names (Kind/name) the objects the fleet would create that exist and are not the
// fleet's: under its derived names, and the reservation under the name it would create. None
// of them is ever patched, adopted or deleted.
func (fx *facts) nameTaken() []string {
	var out []string
	for _, u := range fx.view.Unowned {
		if fx.wouldCreate(u) {
			out = append(out, u)
		}
	}
	return out
}

// isTaken reports whether the object named Kind/name exists and is not the fleet's.
func (fx *facts) isTaken(obj string) bool { return slices.Contains(fx.taken, obj) }

// wouldCreate reports whether the fleet would create the object named Kind/name.
func (fx *facts) wouldCreate(obj string) bool {
	f := fx.view.Fleet
	if obj == "CelldReservation/"+render.ReservationName(f.Spec.Bucket) {
		return true
	}
	for _, d := range kinds.DerivedObjects(f) {
		if d.String() == obj {
			return true
		}
	}
	return false
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

// fenceText says which members only fencing can replace, since when, and the one step that
// unblocks each: the operator cannot tell a dead machine from a partitioned one, its user can.
func (fx *facts) fenceText() string {
	u := fx.unfenced[0]
	after := "its Pod is removed"
	if render.UsesStatefulSet(&fx.view.Fleet.Spec) {
		after = "the member is replaced under the same name"
		if fx.view.Fleet.Spec.Profile == v1alpha1.ProfilePersistentFleet {
			after += ", on its own disk"
		}
	}
	since := "for longer than the grace period"
	if !u.since.IsZero() {
		since = "since " + u.since.UTC().Format(time.RFC3339)
	}
	msg := fmt.Sprintf("member %s is on node %s, NotReady or unreachable %s (spec.healing.unreachableGracePeriod %s): the node may be cut off "+
		"but alive and still running it, so the operator does not force it away, which would start a second copy; once the machine is powered off, "+
		"run kubectl taint node %s %s=nodeshutdown:NoExecute (or kubectl delete node %s) and %s",
		u.member.Name, u.node, since, gracePeriod(fx.view.Fleet), u.node, corev1.TaintNodeOutOfService, u.node, after)
	if n := len(fx.unfenced); n > 1 {
		others := make([]string, 0, n-1)
		for _, o := range fx.unfenced[1:] {
			others = append(others, o.member.Name+" on "+o.node)
		}
		msg += "; the same holds for members " + joinNames(others)
	}
	return msg
}
