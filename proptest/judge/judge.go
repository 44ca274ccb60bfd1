// Package judge judges the safety contract (SPEC section 5) from the simulator's record of what
// happened: the requests the cluster received, the replica writes, Pod and disk deletions as the
// cluster was at that moment, the member processes still running. It shares no code with the
// operator's decisions: it imports neither machine, reservation, events nor loop (a test holds
// it to that), reads readiness from Pods and nodes itself, and computes targets itself.
package judge

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
)

// The clauses of the safety contract, as the judges name them.
const (
	C1ShrinkOneAfterRollout = "1 scale-in by one, only once rolled out and all ready"
	C2GrowInOneStep         = "2 growth reaches the target in one step"
	C3PodDeletedOnlyToHeal  = "3 a Pod is deleted only to heal one lost member"
	C4DiskDeletedOnDelete   = "4 disks deleted only on fleet deletion, own, no member left; grown only, own"
	C5StatusNotRead         = "5 status is a function of observation"
	C6HistoryClearedSafe    = "6 clearing the history allows no earlier scale-in"
	C7OnePath               = "7 manual requests and recommendations take one path"
	C8Idempotent            = "8 converged: no mutating request on resync"
	C9OneBucketOneUID       = "9 one bucket, one fleet UID"
	C10Liveness             = "10 once faults stop, Steady at target"
	C11Restart              = "11 an operator restart breaks nothing"
)

// Clauses lists every clause, in order.
var Clauses = []string{C1ShrinkOneAfterRollout, C2GrowInOneStep, C3PodDeletedOnlyToHeal, C4DiskDeletedOnDelete,
	C5StatusNotRead, C6HistoryClearedSafe, C7OnePath, C8Idempotent, C9OneBucketOneUID, C10Liveness, C11Restart}

// What clause 3 counts besides deletions.
const (
	ForceDeletes     = "force-deletes judged against fencing"
	PartitionedTimes = "checks while a member ran on a partitioned node, judged for two copies"
)

// afterRestart is how many rounds after an operator restart the writes judged also count for
// clause 11: the restarted operator's first decisions are where a lost memory would show.
const afterRestart = 12

// Violation is a broken clause.
type Violation struct {
	Clause string
	Detail string
}

func (v *Violation) Error() string { return "contract clause " + v.Clause + " violated: " + v.Detail }

func fail(clause, format string, args ...any) error {
	return &Violation{Clause: clause, Detail: fmt.Sprintf(format, args...)}
}

// Judge watches one simulated cluster.
type Judge struct {
	c *sim.Cluster
	// cursors into the cluster's records already judged.
	replicas, pods, disks, requests int
	partitions, stopCursor          int
	uninstallCursor, resizes        int
	// bound remembers the first fleet UID the operator reserved each bucket to.
	bound map[string]types.UID
	// resUID is the object UID of the reservation that bound it.
	resUID map[string]types.UID
	// Judged counts, per clause, the real writes, deletions and decisions judged.
	Judged map[string]int
	// Extra counts what clause 3 judged besides deletions.
	Extra        map[string]int
	round        int
	restartRound int
}

// New watches a cluster.
func New(c *sim.Cluster) *Judge {
	return &Judge{c: c, bound: map[string]types.UID{}, resUID: map[string]types.UID{}, Judged: map[string]int{}, Extra: map[string]int{}, restartRound: -afterRestart - 1}
}

// Count adds n judged cases to a clause (for the clauses judged by twins outside this package).
func (j *Judge) Count(clause string, n int) { j.Judged[clause] += n }

func (j *Judge) judged(clause string) {
	j.Judged[clause]++
	if j.round-j.restartRound <= afterRestart {
		j.Judged[C11Restart]++
	}
}

// Restarted notes an operator restart: what it does next also proves clause 11.
func (j *Judge) Restarted() { j.restartRound = j.round }

// Round judges everything the cluster recorded since the last call, and the member processes
// running now.
func (j *Judge) Round() error {
	j.round++
	for _, check := range []func() error{j.replicaWrites, j.stops, j.rolloutWrites, j.podDeletions, j.copies, j.diskDeletions, j.diskResizes, j.uninstalls, j.buckets} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// Check judges what happened since the last call without counting a round: the operator may act
// several times between rounds, on intermediate states.
func (j *Judge) Check() error {
	for _, check := range []func() error{j.replicaWrites, j.stops, j.rolloutWrites, j.podDeletions, j.copies, j.diskDeletions, j.diskResizes, j.uninstalls, j.buckets} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// Targets are the sizes a fleet may be grown to: its spec's members, and in Auto mode what any
// utilization sample delivered for it recommends (caches may lag a newer sample).
func (j *Judge) Targets(f *v1alpha1.CelldFleet) []int32 {
	out := []int32{f.Spec.Members}
	if f.Spec.Capacity.Mode != v1alpha1.CapacityAuto {
		return out
	}
	for _, s := range j.c.UtilizationSamples() {
		if s.Namespace != f.Namespace || s.Name != f.Name || s.Time.Before(f.CreationTimestamp.Time) {
			continue
		}
		if n, ok := Recommend(&f.Spec.Capacity, s); ok {
			out = append(out, n)
		}
	}
	return out
}

// Target is the size a settled fleet must have: in Auto mode what the latest sample that observed
// something recommends.
func (j *Judge) Target(f *v1alpha1.CelldFleet) int32 {
	t := f.Spec.Members
	if f.Spec.Capacity.Mode != v1alpha1.CapacityAuto {
		return t
	}
	for _, s := range j.c.UtilizationSamples() {
		if s.Namespace == f.Namespace && s.Name == f.Name && !s.Time.Before(f.CreationTimestamp.Time) {
			// A sample that observed nothing decides nothing: the fleet stays where the
			// previous one put it.
			if n, ok := Recommend(&f.Spec.Capacity, s); ok {
				t = n
			}
		}
	}
	return t
}

// Recommend is the size that puts the members' mean utilization on the fleet's target, within
// its bounds: used members x percent / target, rounded up. The SPEC's formula, written again.
func Recommend(c *v1alpha1.CapacitySpec, s sim.UtilizationSample) (int32, bool) {
	if s.Unavailable || s.Members <= 0 {
		return 0, false
	}
	target := int64(c.TargetUtilization)
	if target <= 0 {
		target = 70
	}
	n := (int64(s.Percent)*int64(s.Members) + target - 1) / target
	lo, hi := int64(1), int64(1000)
	if c.MinMembers != nil {
		lo = int64(*c.MinMembers)
	}
	if c.MaxMembers != nil {
		hi = int64(*c.MaxMembers)
	}
	return int32(min(max(n, lo), hi)), true
}

func (j *Judge) replicaWrites() error {
	writes := j.c.ReplicaWrites()
	for _, w := range writes[j.replicas:] {
		if w.FleetDeleting {
			continue
		}
		if w.Created && w.Members > 0 {
			// A workload created over members that outlived the last one (deleted with
			// propagation Orphan to change its claim template) starts from them: creating it at
			// their number takes none away and adds none.
			w.From = int32(w.Members)
		}
		switch {
		case w.To < w.From:
			j.judged(C1ShrinkOneAfterRollout)
			if w.From-w.To != 1 || !w.PrevRolledOut || w.NotReady > 0 || w.Cordoned > 0 {
				return fail(C1ShrinkOneAfterRollout, "%s %s/%s replicas %d -> %d at %s (previous rolled out: %t, members not ready: %d, members on a cordoned node: %d)",
					w.Kind, w.Namespace, w.Name, w.From, w.To, w.Time.Format("15:04:05"), w.PrevRolledOut, w.NotReady, w.Cordoned)
			}
		case w.To > w.From:
			f := j.fleetByUID(w.Namespace, w.Name, w.FleetUID)
			if f == nil {
				continue
			}
			j.judged(C2GrowInOneStep)
			targets := j.Targets(f)
			ok := false
			for _, t := range targets {
				ok = ok || t == w.To
			}
			if !ok {
				return fail(C2GrowInOneStep, "%s %s/%s grew %d -> %d at %s but the target is one of %v", w.Kind, w.Namespace, w.Name, w.From, w.To, w.Time.Format("15:04:05"), targets)
			}
		}
	}
	j.replicas = len(writes)
	return nil
}

func (j *Judge) fleetByUID(namespace, name string, uid types.UID) *v1alpha1.CelldFleet {
	f := j.c.Fleet(namespace, name)
	if f == nil || (uid != "" && f.UID != uid) {
		return nil
	}
	return f
}

func (j *Judge) podDeletions() error {
	dels := j.c.PodDeletions()
	perFleet := map[string]int{}
	for _, d := range dels[j.pods:] {
		j.judged(C3PodDeletedOnlyToHeal)
		// One at a time: two deletions of one fleet in one pass of the operator.
		k := string(d.FleetUID) + "@" + d.Time.String()
		perFleet[k]++
		since := func(t time.Time) time.Duration { return d.Time.Sub(t) }
		unhealthy := d.NodeState == sim.NodeNotReady || d.NodeState == sim.NodeUnreachable
		switch {
		case !d.Preconditioned:
			return fail(C3PodDeletedOnlyToHeal, "pod %s deleted without a UID precondition", d.Name)
		case d.FleetDeleting:
			return fail(C3PodDeletedOnlyToHeal, "pod %s deleted (%s) while its fleet is being deleted", d.Name, d.Reason)
		case d.OtherNotReady > 0:
			return fail(C3PodDeletedOnlyToHeal, "pod %s deleted (%s) while %d other members were not ready", d.Name, d.Reason, d.OtherNotReady)
		case perFleet[k] > 1:
			return fail(C3PodDeletedOnlyToHeal, "two pods of fleet %s deleted at once (%s)", d.FleetUID, d.Name)
		}
		// Could it come back on its own? A member stuck on a lost claim or a broken revision past
		// the grace period cannot, whatever its node does meanwhile; otherwise only its node's
		// loss (gone, fenced, or unhealthy past the grace period) explains the deletion.
		lost := false
		stuck := (d.ClaimLost || d.RevisionBehind) && !d.NotReadySince.IsZero() && since(d.NotReadySince) >= d.Grace
		switch {
		case d.NodeState == sim.NodeGone || d.NodeFenced:
			lost = true
		case stuck:
			lost = true
		case unhealthy:
			lost = since(d.NodeUnhealthySince) >= d.Grace
			if !lost {
				return fail(C3PodDeletedOnlyToHeal, "pod %s deleted (%s) %s after its node %s became %s, within the grace period %s",
					d.Name, d.Reason, since(d.NodeUnhealthySince), d.Node, d.NodeState, d.Grace)
			}
		case d.WasReady:
			return fail(C3PodDeletedOnlyToHeal, "pod %s was ready on a healthy node and was deleted (%s)", d.Name, d.Reason)
		case d.WasTerminating:
			return fail(C3PodDeletedOnlyToHeal, "pod %s was terminating on a healthy node, which finishes it, and was deleted (%s)", d.Name, d.Reason)
		}
		if !lost {
			return fail(C3PodDeletedOnlyToHeal, "pod %s deleted (%s) though it could come back: node %s %s, not ready since %s (grace %s), claim lost %t, revision behind %t",
				d.Name, d.Reason, d.Node, d.NodeState, d.NotReadySince.Format("15:04:05"), d.Grace, d.ClaimLost, d.RevisionBehind)
		}
		if d.Force {
			j.Extra[ForceDeletes]++
			if d.NodeState != sim.NodeGone && !d.NodeFenced {
				return fail(C3PodDeletedOnlyToHeal, "pod %s force-deleted (%s) though its node %s is %s and not fenced out-of-service: its process may still run",
					d.Name, d.Reason, d.Node, d.NodeState)
			}
		}
	}
	j.pods = len(dels)
	return nil
}

// copies: no member identity runs twice, a removed Pod's process on a partitioned node and its
// replacement.
func (j *Judge) copies() error {
	partitioned := len(j.c.Zombies()) > 0
	for _, p := range j.c.List(sim.KindPod, "") {
		pod := p.(*corev1.Pod)
		if s := j.c.NodeState(pod.Spec.NodeName); pod.Status.Phase == corev1.PodRunning &&
			(s == sim.NodeNotReady || s == sim.NodeUnreachable) && !j.c.Fenced(pod.Spec.NodeName) {
			partitioned = true
			break
		}
	}
	if !partitioned {
		return nil
	}
	j.Extra[PartitionedTimes]++
	copies := j.c.RunningCopies()
	keys := make([]string, 0, len(copies))
	for k := range copies {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if where := copies[k]; len(where) > 1 {
			return fail(C3PodDeletedOnlyToHeal, "two copies of member %s run: on %s", k, strings.Join(where, " and "))
		}
	}
	return nil
}

func (j *Judge) diskDeletions() error {
	dels := j.c.DiskDeletions()
	for _, d := range dels[j.disks:] {
		j.judged(C4DiskDeletedOnDelete)
		if !d.Preconditioned || !d.FleetExists || !d.FleetDeleting || d.FleetProfile != v1alpha1.ProfilePersistentFleet || d.MemberPods != 0 {
			return fail(C4DiskDeletedOnDelete, "disk %s deleted: precondition %t, its fleet %s exists %t deleting %t profile %s, %d member pods",
				d.Name, d.Preconditioned, d.FleetName, d.FleetExists, d.FleetDeleting, d.FleetProfile, d.MemberPods)
		}
		// Only a claim its StatefulSet made is the fleet's: one under another name that carries
		// its labels was made by someone else.
		if claimOrdinal(d.FleetName, d.Name) < 0 {
			return fail(C4DiskDeletedOnDelete, "disk %s deleted as fleet %s's, but it is not named as that fleet's StatefulSet names its claims", d.Name, d.FleetName)
		}
	}
	j.disks = len(dels)
	return nil
}

// diskResizes: a claim the operator resized is the live fleet's own (its UID label, and named as
// the fleet's StatefulSet names its claims), it grew, and no further than the fleet's
// spec.storage.size.
func (j *Judge) diskResizes() error {
	rs := j.c.DiskResizes()
	for _, r := range rs[j.resizes:] {
		j.judged(C4DiskDeletedOnDelete)
		switch {
		case !r.FleetExists || claimOrdinal(r.FleetName, r.Name) < 0:
			return fail(C4DiskDeletedOnDelete, "disk %s resized, but it is not a claim of a live fleet %s (uid label %s) named as its StatefulSet names them", r.Name, r.FleetName, r.FleetUID)
		case r.To.Cmp(r.From) <= 0:
			return fail(C4DiskDeletedOnDelete, "disk %s resized from %s to %s: a claim only grows", r.Name, r.From.String(), r.To.String())
		case r.To.Cmp(r.FleetSize) > 0:
			return fail(C4DiskDeletedOnDelete, "disk %s resized to %s, past its fleet's spec.storage.size %s", r.Name, r.To.String(), r.FleetSize.String())
		}
	}
	j.resizes = len(rs)
	return nil
}

// buckets: a bucket the operator reserved stays reserved to the first UID it was reserved to,
// and no fleet of another UID gets a workload.
func (j *Judge) buckets() error {
	reqs := j.c.Requests()
	for _, r := range reqs[j.requests:] {
		if r.Verb == "create" && r.Resource == "celldreservations" && r.Changed && r.Err == nil {
			j.judged(C9OneBucketOneUID)
		}
	}
	j.requests = len(reqs)
	for _, o := range j.c.List(sim.KindReservation, "") {
		r := o.(*v1alpha1.CelldReservation)
		if r.Labels["app.kubernetes.io/managed-by"] == "" {
			continue // made by hand: not the operator's word
		}
		b := BucketKey(r.Spec.Bucket)
		if uid, ok := j.bound[b]; ok && uid != r.Spec.FleetUID {
			// Only a person frees a bucket, by deleting its reservation; even then, while the
			// fleet it bound still exists, the bucket is that fleet's.
			if j.resUID[b] == r.UID || j.fleetExists(uid) {
				return fail(C9OneBucketOneUID, "bucket %s was bound to %s, now to %s", b, uid, r.Spec.FleetUID)
			}
		}
		j.bound[b], j.resUID[b] = r.Spec.FleetUID, r.UID
	}
	for _, o := range j.c.List(sim.KindFleet, "") {
		f := o.(*v1alpha1.CelldFleet)
		if !owned(j.c.StatefulSet(f.Namespace, f.Name), f.UID) && !owned(j.c.Deployment(f.Namespace, f.Name), f.UID) {
			continue
		}
		if uid, ok := j.bound[BucketKey(f.Spec.Bucket)]; !ok || uid != f.UID {
			return fail(C9OneBucketOneUID, "fleet %s (uid %s) has a workload but bucket %s is bound to %q", f.Name, f.UID, BucketKey(f.Spec.Bucket), uid)
		}
	}
	return nil
}

// Bound is the fleet UID the operator reserved a bucket to, "" when none.
func (j *Judge) Bound(b v1alpha1.BucketSpec) types.UID { return j.bound[BucketKey(b)] }

func owned(o interface {
	GetOwnerReferences() []metav1.OwnerReference
}, uid types.UID) bool {
	if o == nil || reflect.ValueOf(o).IsNil() {
		return false
	}
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

// Settled judges liveness (clause 10) from the cluster's objects, not from the fleet's status:
// every fleet not being deleted whose bucket the operator reserved to it runs its target number
// of members, all Running and Ready on Ready nodes with its image, and its workload asks for
// exactly that many; every fleet being deleted is gone. It returns the first fleet that is not.
func (j *Judge) Settled() error {
	for _, o := range j.c.List(sim.KindFleet, "") {
		f := o.(*v1alpha1.CelldFleet)
		if f.DeletionTimestamp != nil {
			var desc []string
			for _, p := range j.members(f) {
				desc = append(desc, fmt.Sprintf("%s(node %s %s, %s, ready %t, terminating %t)", p.Name, p.Spec.NodeName,
					j.c.NodeState(p.Spec.NodeName), p.Status.Phase, j.serving(p, p.Spec.Containers[0].Image), p.DeletionTimestamp != nil))
			}
			return fail(C10Liveness, "fleet %s is still being deleted: %d claims of it remain, and pods %s", f.Name, j.claims(f), strings.Join(desc, ", "))
		}
		if j.bound[BucketKey(f.Spec.Bucket)] != f.UID {
			continue // refused its bucket: nothing to converge
		}
		if f.Spec.Hibernate {
			if err := j.asleep(f); err != nil {
				return err
			}
			continue
		}
		target := j.Target(f)
		replicas := int32(-1)
		if s := j.c.StatefulSet(f.Namespace, f.Name); owned(s, f.UID) {
			replicas = *s.Spec.Replicas
		} else if d := j.c.Deployment(f.Namespace, f.Name); owned(d, f.UID) {
			replicas = *d.Spec.Replicas
		}
		pods := j.members(f)
		serving := 0
		for _, p := range pods {
			if j.serving(p, f.Spec.Image) {
				serving++
			}
		}
		if replicas != target || len(pods) != int(target) || serving != int(target) {
			var desc []string
			for _, p := range pods {
				desc = append(desc, fmt.Sprintf("%s(node %s %s, %s, ready %t, image %s, serving %t, terminating %t, revision %s%s)", p.Name, p.Spec.NodeName,
					j.c.NodeState(p.Spec.NodeName), p.Status.Phase, podReady(p), p.Spec.Containers[0].Image, j.serving(p, f.Spec.Image), p.DeletionTimestamp != nil,
					p.Labels["controller-revision-hash"], unschedulable(p)))
			}
			return fail(C10Liveness, "fleet %s: target %d, workload replicas %d, %d member pods of which %d serve %s: %s; claims %s",
				f.Name, target, replicas, len(pods), serving, f.Spec.Image, strings.Join(desc, ", "), j.claimStates(f))
		}
	}
	return nil
}

// CountSettled counts every fleet a liveness judgement covered.
func (j *Judge) CountSettled() {
	for range j.c.List(sim.KindFleet, "") {
		j.Judged[C10Liveness]++
	}
}

func (j *Judge) members(f *v1alpha1.CelldFleet) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range j.c.Pods(f.Namespace) {
		if p.Labels["celld.io/fleet-uid"] == string(f.UID) {
			out = append(out, p)
		}
	}
	return out
}

// claimStates describes the fleet's claims: what keeps a member from starting is often its disk.
func (j *Judge) claimStates(f *v1alpha1.CelldFleet) string {
	var desc []string
	for _, c := range j.c.PVCs(f.Namespace) {
		if c.Labels["celld.io/fleet-uid"] == string(f.UID) {
			desc = append(desc, fmt.Sprintf("%s(%s, deleting %t, finalizers %v)", c.Name, c.Status.Phase, c.DeletionTimestamp != nil, c.Finalizers))
		}
	}
	return strings.Join(desc, ", ")
}

func (j *Judge) claims(f *v1alpha1.CelldFleet) int {
	n := 0
	for _, c := range j.c.PVCs(f.Namespace) {
		if c.Labels["celld.io/fleet-uid"] == string(f.UID) {
			n++
		}
	}
	return n
}

// serving: the Pod runs the image, its Ready condition is True, it is not terminating, and its
// node exists and is Ready.
func (j *Judge) serving(p *corev1.Pod, image string) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
		return false
	}
	if len(p.Spec.Containers) == 0 || p.Spec.Containers[0].Image != image {
		return false
	}
	n := j.c.Node(p.Spec.NodeName)
	if !podReady(p) || n == nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// AtRest judges idempotence (clause 8): run, the operator's passes over a converged cluster, must
// send no mutating request at all, not even one that changes nothing.
func (j *Judge) AtRest(clause string, run func()) error {
	before := len(j.c.Requests())
	run()
	after := j.c.Requests()
	for _, o := range j.c.List(sim.KindFleet, "") {
		_ = o
		j.Judged[clause]++
	}
	if len(after) != before {
		var reqs []string
		for _, r := range after[before:] {
			reqs = append(reqs, fmt.Sprintf("%s %s %s/%s (changed %t)", r.Verb, r.Resource, r.Namespace, r.Name, r.Changed))
		}
		return fail(clause, "a converged cluster got %d requests: %s", len(after)-before, strings.Join(reqs, "; "))
	}
	return nil
}

func (j *Judge) fleetExists(uid types.UID) bool {
	for _, o := range j.c.List(sim.KindFleet, "") {
		if o.(*v1alpha1.CelldFleet).UID == uid {
			return true
		}
	}
	return false
}

// unschedulable is the scheduler's word on a Pod it could not place, for a failure's story.
func unschedulable(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return ", unschedulable: " + c.Message
		}
	}
	return ""
}
