package judge

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
)

// S6Reported names the promise of SPEC section 6 about what only a person can unblock: the
// status says so, naming what to act on.
const S6Reported = "§6 what only a person can unblock is reported"

// UnfencedPasses counts the passes judged for a member that only fencing can replace.
const UnfencedPasses = "passes that saw a member past the grace period on a node nobody fenced, judged reported"

// defaultGrace is spec.healing.unreachableGracePeriod when the fleet leaves it out (the CRD's
// default).
const defaultGrace = 5 * time.Minute

// Unfenced judges one pass on one fleet against what the operator observed: a member of a
// fleet whose members have identities (a StatefulSet's: it comes back under the same name and
// disk only once its Pod is gone), or a member already terminating, on a node that exists, is
// not Ready or is unreachable, and has been so for longer than the fleet's grace period, with no
// out-of-service taint, can only be replaced once a person fences the node; a status written in
// that pass must say Degraded=True, and when its reason is MemberUnreachable, name the member
// and its node. The time the node went bad is read the latest way the node shows it (its Ready
// condition's last transition, the unreachable taint's time), so the operator is held to report
// only what is past its grace by every account.
func (j *Judge) Unfenced(f *v1alpha1.CelldFleet, now time.Time, pods []*corev1.Pod, nodes map[string]*corev1.Node, synced bool, sent []sim.Request) error {
	if f == nil || f.DeletionTimestamp != nil || !synced {
		return nil
	}
	grace := defaultGrace
	if g := f.Spec.Healing.UnreachableGracePeriod; g != nil {
		grace = g.Duration
	}
	identities := f.Spec.Profile == v1alpha1.ProfilePersistentFleet || f.Spec.Workload == v1alpha1.WorkloadOrderedStatefulSet
	var members, where []string
	var member, node string
	for _, p := range pods {
		if types.UID(p.Labels["celld.io/fleet-uid"]) != f.UID || p.Spec.NodeName == "" || (!identities && p.DeletionTimestamp == nil) {
			continue
		}
		n, ok := nodes[p.Spec.NodeName]
		if !ok {
			continue // gone: replaced at once, nothing to report
		}
		// The status may name any member on a node gone bad: one at its grace period's very end
		// is past it to the operator, not yet to this judge.
		since, bad := unhealthySince(n)
		if bad {
			members, where = append(members, p.Name), append(where, n.Name)
		}
		if bad && now.Sub(since) > grace && member == "" {
			member, node = p.Name, n.Name
		}
	}
	if member == "" {
		return nil
	}
	j.Extra[UnfencedPasses]++
	j.judged(S6Reported)
	problem := fmt.Sprintf("member %s has been on node %s, unhealthy past the grace period %s and not fenced: only a person fencing the node replaces it", member, node, grace)
	return mustSay(f, sent, problem, "MemberUnreachable", func(m string) bool {
		for i := range members {
			if strings.Contains(m, members[i]) && strings.Contains(m, where[i]) {
				return true
			}
		}
		return false
	}, fmt.Sprintf("one of the members %v with its node %v", members, where))
}

// unhealthySince says whether a node is unhealthy (not Ready, or tainted unreachable), and
// since when by the latest of the times it shows; a fenced node is not judged here.
func unhealthySince(n *corev1.Node) (time.Time, bool) {
	bad := true
	var since time.Time
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			bad = c.Status != corev1.ConditionTrue
			since = c.LastTransitionTime.Time
		}
	}
	for _, t := range n.Spec.Taints {
		switch t.Key {
		case corev1.TaintNodeOutOfService:
			return time.Time{}, false
		case corev1.TaintNodeUnreachable:
			bad = true
			if t.TimeAdded != nil && t.TimeAdded.After(since) {
				since = t.TimeAdded.Time
			}
		}
	}
	if since.IsZero() {
		since = n.CreationTimestamp.Time
	}
	return since, bad
}

// StuckPasses counts the passes judged for a member that never becomes ready.
const StuckPasses = "passes that saw a member not ready past the grace period with nothing to heal, judged reported"

// Stuck judges one pass on one fleet against what the operator observed: a member of a
// StatefulSet fleet that is not ready and not terminating, of the revision its StatefulSet would
// create it on again (the update revision, or below a held partition the current one: replacing
// it would bring back the same template), on a healthy node or
// none yet, whose disk (if it mounts one) is in the view and neither Lost nor being deleted, and
// that has not been ready for longer than the grace period by every account (its Ready
// condition's last transition, its creation), is stuck: nothing the operator does unblocks it
// (a member of an older revision is a broken rollout's, which healing replaces).
// A status written in that pass must say Degraded=True, and when its reason is MemberStuck, name
// the member.
func (j *Judge) Stuck(f *v1alpha1.CelldFleet, now time.Time, set *appsv1.StatefulSet, pods []*corev1.Pod, claims []*corev1.PersistentVolumeClaim, nodes map[string]*corev1.Node, synced bool, sent []sim.Request) error {
	if f == nil || f.DeletionTimestamp != nil || !synced || set == nil || set.Status.UpdateRevision == "" {
		return nil
	}
	grace := defaultGrace
	if g := f.Spec.Healing.UnreachableGracePeriod; g != nil {
		grace = g.Duration
	}
	var stuck, nameable []string
	for _, p := range pods {
		if types.UID(p.Labels["celld.io/fleet-uid"]) != f.UID || p.DeletionTimestamp != nil || p.Labels[appsv1.StatefulSetRevisionLabel] != comesBackOn(set, p) {
			continue
		}
		if n := p.Spec.NodeName; n != "" {
			node, ok := nodes[n]
			if !ok {
				continue
			}
			if _, bad := unhealthySince(node); bad {
				continue
			}
			if fenced(node) {
				continue
			}
		} else if heldByCordon(p, claims, nodes) {
			continue
		}
		since, ready := p.CreationTimestamp.Time, false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = c.Status == corev1.ConditionTrue
				if c.LastTransitionTime.After(since) {
					since = c.LastTransitionTime.Time
				}
			}
		}
		if ready || !diskUsable(p, claims) {
			continue
		}
		// The status may name any of them: one at its grace period's very end is stuck to the
		// operator, not yet to this judge.
		nameable = append(nameable, p.Name)
		if now.Sub(since) <= grace {
			continue
		}
		stuck = append(stuck, p.Name)
	}
	if len(stuck) == 0 {
		return nil
	}
	j.Extra[StuckPasses]++
	j.judged(S6Reported)
	problem := fmt.Sprintf("members %v have not been ready for longer than the grace period %s, with nothing healing can do", stuck, grace)
	return mustSay(f, sent, problem, "MemberStuck", namesAnyOf(nameable), fmt.Sprintf("one of the members not ready %v", nameable))
}

// heldByCordon: a member no node took is node maintenance's, never stuck (docs/node-maintenance.md),
// when its disk's volume is on a cordoned node, or when a node is cordoned and the scheduler
// counted cordoned nodes among those it turned the member down on. A refusal made before the
// scheduler weighed any node (a claim that cannot bind) is not the cordon's.
func heldByCordon(p *corev1.Pod, claims []*corev1.PersistentVolumeClaim, nodes map[string]*corev1.Node) bool {
	cordoned := func(name string) bool { n, ok := nodes[name]; return ok && n.Spec.Unschedulable }
	if name := claimOf(p); name != "" {
		for _, c := range claims {
			if c.Name == name && c.Namespace == p.Namespace && cordoned(c.Annotations["volume.kubernetes.io/selected-node"]) {
				return true
			}
		}
	}
	refusal := ""
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			refusal = c.Message
		}
	}
	if !strings.Contains(refusal, "node(s) were unschedulable") {
		return false
	}
	for n := range nodes {
		if cordoned(n) {
			return true
		}
	}
	return false
}

func fenced(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeOutOfService {
			return true
		}
	}
	return false
}

// diskUsable: the member mounts no claim, or its claim is in the view, not Lost and not being
// deleted (a lost or missing disk is healing's, or a person's, not a stuck member's).
func diskUsable(p *corev1.Pod, claims []*corev1.PersistentVolumeClaim) bool {
	name := claimOf(p)
	if name == "" {
		return true
	}
	for _, c := range claims {
		if c.Name == name && c.Namespace == p.Namespace {
			return c.DeletionTimestamp == nil && c.Status.Phase != corev1.ClaimLost
		}
	}
	return false
}

func degradedOf(st *v1alpha1.CelldFleetStatus) (degraded *string, reason, message string) {
	for i := range st.Conditions {
		if c := &st.Conditions[i]; c.Type == v1alpha1.ConditionDegraded {
			s := string(c.Status)
			degraded, reason, message = &s, c.Reason, c.Message
		}
	}
	return degraded, reason, message
}

// DiskGoingPasses counts the passes judged for a running member whose disk is going away.
const DiskGoingPasses = "passes that saw a running member's disk deleted by hand or lost, judged reported"

// DiskGoing judges one pass on one fleet against what the operator observed: a member that is
// not terminating and mounts a claim that is being deleted (not by the operator: its fleet is
// not being deleted) or whose volume is Lost keeps running on it only until it stops, then
// starts on an empty disk, or never; the data on it is the person's to copy off now. A status
// written in that pass must say Degraded=True, and when its reason is DiskLost, name the claim.
func (j *Judge) DiskGoing(f *v1alpha1.CelldFleet, pods []*corev1.Pod, claims []*corev1.PersistentVolumeClaim, sent []sim.Request) error {
	if f == nil || f.DeletionTimestamp != nil {
		return nil
	}
	var going []string
	for _, p := range pods {
		if types.UID(p.Labels["celld.io/fleet-uid"]) != f.UID || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range claims {
			if c.Namespace == p.Namespace && c.Name == claimOf(p) && (c.DeletionTimestamp != nil || c.Status.Phase == corev1.ClaimLost) {
				going = append(going, c.Name)
			}
		}
	}
	if len(going) == 0 {
		return nil
	}
	j.Extra[DiskGoingPasses]++
	j.judged(S6Reported)
	problem := fmt.Sprintf("claims %v of running members are being deleted or lost: the data on them is a person's to copy off", going)
	return mustSay(f, sent, problem, "DiskLost", namesAnyOf(going), fmt.Sprintf("one of the claims %v", going))
}

// claimOf is the claim a Pod mounts, empty when none.
func claimOf(p *corev1.Pod) string {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// DeletionBlockedPasses counts the passes judged for a deletion the ordered scale-down blocks.
// The random sequences seldom make two members not ready under a deletion; the scenario
// delete-blocked-scale-down does, so it is not among the Extras whose coverage they must show.
const DeletionBlockedPasses = "passes that saw a deleting fleet's ordered scale-down blocked, judged reported"

// DeletionBlocked judges one pass on a fleet being deleted against what the operator observed:
// its StatefulSet (OrderedReady) stopped at zero removes the highest member first, and a member
// that is not ready is removed only when it is the lowest one not ready. With no member
// terminating and two or more not ready, the highest of those waits on the lowest for good: the
// operator deletes no member Pod while deleting, so only a person unblocks it. A status written
// in that pass must say Degraded=True, and when its reason is DeletionBlocked, name both.
func (j *Judge) DeletionBlocked(f *v1alpha1.CelldFleet, set *appsv1.StatefulSet, pods []*corev1.Pod, sent []sim.Request) error {
	if f == nil || f.DeletionTimestamp == nil || set == nil || set.Spec.Replicas == nil || *set.Spec.Replicas != 0 {
		return nil
	}
	lowest, highest := -1, -1
	members := 0
	for _, p := range pods {
		if types.UID(p.Labels["celld.io/fleet-uid"]) != f.UID {
			continue
		}
		n, ok := ordinalOf(p.Name, set.Name)
		if !ok || p.DeletionTimestamp != nil {
			return nil
		}
		members++
		if podReady(p) {
			continue
		}
		if lowest < 0 || n < lowest {
			lowest = n
		}
		if n > highest {
			highest = n
		}
	}
	if members < 2 || lowest == highest {
		return nil
	}
	blocked, blocker := fmt.Sprintf("%s-%d", set.Name, highest), fmt.Sprintf("%s-%d", set.Name, lowest)
	j.Extra[DeletionBlockedPasses]++
	j.judged(S6Reported)
	problem := fmt.Sprintf("it is being deleted and its ordered scale-down cannot remove %s while %s is not ready: only a person unblocks it", blocked, blocker)
	return mustSay(f, sent, problem, "DeletionBlocked",
		func(m string) bool { return strings.Contains(m, blocked) && strings.Contains(m, blocker) }, blocked+" and "+blocker)
}

// comesBackOn is the revision the StatefulSet gives a member it creates again: the update
// revision, or, below its partition, the current one.
func comesBackOn(set *appsv1.StatefulSet, p *corev1.Pod) string {
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		if n, ok := ordinalOf(p.Name, set.Name); ok && n < int(*ru.Partition) {
			return set.Status.CurrentRevision
		}
	}
	return set.Status.UpdateRevision
}

func ordinalOf(pod, set string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, set+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0 && strconv.Itoa(n) == rest
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// CannotComeBackPasses counts the passes judged for a member that cannot come back while
// another is not ready.
const CannotComeBackPasses = "passes that saw a member that cannot come back while another is not ready, judged reported"

// CannotComeBack judges one pass on a live, awake fleet against what the operator observed: a member
// whose node is gone or fenced cannot come back where it is, and healing replaces it only while
// every other member is ready (one member away at a time). With another member not ready or
// terminating, it waits on that one, which may never come back on its own either: a status
// written in that pass must say Degraded=True, and when its reason is MemberCannotComeBack,
// name the member.
func (j *Judge) CannotComeBack(f *v1alpha1.CelldFleet, pods []*corev1.Pod, nodes map[string]*corev1.Node, synced bool, sent []sim.Request) error {
	if f == nil || f.DeletionTimestamp != nil || !synced || f.Spec.Hibernate {
		// A fleet going to sleep stops every member: it waits on none coming back.
		return nil
	}
	var lost, notReady []string
	for _, p := range pods {
		if types.UID(p.Labels["celld.io/fleet-uid"]) != f.UID {
			continue
		}
		if n, ok := nodes[p.Spec.NodeName]; p.Spec.NodeName != "" && (!ok || fenced(n)) {
			lost = append(lost, p.Name)
		}
		if p.DeletionTimestamp != nil || !podReady(p) {
			notReady = append(notReady, p.Name)
		}
	}
	// A lost member waits on any other one not ready, or lost too.
	waits := len(lost) > 1
	for _, n := range notReady {
		waits = waits || len(lost) == 1 && n != lost[0]
	}
	if !waits {
		return nil
	}
	j.Extra[CannotComeBackPasses]++
	j.judged(S6Reported)
	problem := fmt.Sprintf("members %v cannot come back where they are (their nodes gone or fenced) and wait on members not ready %v", lost, notReady)
	return mustSay(f, sent, problem, "MemberCannotComeBack", namesAnyOf(lost), fmt.Sprintf("one of the members %v", lost))
}

// mustSay judges the statuses a pass wrote for the fleet: each must say Degraded=True (problem
// is what it must report), and one with that reason must name what named looks for (unnamed
// says what that is).
func mustSay(f *v1alpha1.CelldFleet, sent []sim.Request, problem, reason string, named func(message string) bool, unnamed string) error {
	for _, r := range sent {
		if r.Resource != "celldfleets/status" || r.Namespace != f.Namespace || r.Name != f.Name || r.Err != nil || r.Status == nil {
			continue
		}
		degraded, got, message := degradedOf(r.Status)
		if degraded == nil || *degraded != "True" {
			return fail(S6Reported, "fleet %s: %s, and the operator wrote Degraded %s: the status must say so", f.Name, problem, orNone(degraded))
		}
		if got == reason && !named(message) {
			return fail(S6Reported, "fleet %s: Degraded %s %q does not name %s", f.Name, reason, message, unnamed)
		}
	}
	return nil
}

func namesAnyOf(names []string) func(string) bool {
	return func(message string) bool {
		for _, n := range names {
			if strings.Contains(message, n) {
				return true
			}
		}
		return false
	}
}
