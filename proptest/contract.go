package proptest

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/reservation"
)

// The clauses of the safety contract (SPEC section 5), as the checker names them.
const (
	C1ShrinkOneAfterRollout = "1 scale-in by one, only once rolled out and all ready"
	C2GrowInOneStep         = "2 growth reaches the target in one step"
	C3PodDeletedOnlyToHeal  = "3 a Pod is deleted only to heal one lost member"
	C4DiskDeletedOnDelete   = "4 disks deleted only on fleet deletion, own, no member left"
	C5StatusNotRead         = "5 status is a function of observation"
	C6HistoryClearedSafe    = "6 clearing the history allows no earlier scale-in"
	C7OnePath               = "7 manual requests and recommendations take one path"
	C8Idempotent            = "8 converged: no mutating action on resync"
	C9OneBucketOneUID       = "9 one bucket, one fleet UID"
	C10Liveness             = "10 once faults stop, Steady at target"
	C11Restart              = "11 an operator restart breaks nothing"
)

// Checker checks the contract on what the cluster recorded and on the operator's decisions.
type Checker struct {
	c  *sim.Cluster
	op *Operator
	// seen counts the cluster's contract records already checked.
	replicas, pods, disks int
	// bound remembers the first UID each bucket was reserved to.
	bound map[string]types.UID
	// Checks counts the checks made per clause.
	Checks map[string]int
	// twinMachines decide the twins. A machine's memory only names transitions in Kubernetes
	// Events, which twins ignore, and memoizes drift comparisons, which is what makes a
	// twin cheap.
	twinMachines map[string]*machine.Fleet
}

// NewChecker watches a cluster and its operator.
func NewChecker(c *sim.Cluster, op *Operator) *Checker {
	return &Checker{c: c, op: op, bound: map[string]types.UID{}, Checks: map[string]int{}, twinMachines: map[string]*machine.Fleet{}}
}

// Violation is a broken clause.
type Violation struct {
	Clause string
	Detail string
}

func (v *Violation) Error() string { return "contract clause " + v.Clause + " violated: " + v.Detail }

func (k *Checker) fail(clause, format string, args ...any) error {
	return &Violation{Clause: clause, Detail: fmt.Sprintf(format, args...)}
}

func (k *Checker) count(clause string) { k.Checks[clause]++ }

// Total is the number of checks made.
func (k *Checker) Total() int {
	n := 0
	for _, c := range k.Checks {
		n += c
	}
	return n
}

// Summary lists the checks made per clause, one line each.
func (k *Checker) Summary() string {
	keys := make([]string, 0, len(k.Checks))
	for c := range k.Checks {
		keys = append(keys, c)
	}
	sort.Slice(keys, func(i, j int) bool { return clauseNo(keys[i]) < clauseNo(keys[j]) })
	var b strings.Builder
	for _, c := range keys {
		fmt.Fprintf(&b, "  clause %-62s %8d checks\n", c, k.Checks[c])
	}
	return b.String()
}

func clauseNo(c string) int {
	n := 0
	fmt.Sscanf(c, "%d", &n)
	return n
}

// After checks everything the cluster recorded since the last call, and the decisions of this
// round against twins of their views: status cleared, history cleared, the same request as a
// recommendation.
func (k *Checker) After(decisions []machine.Decision) error {
	for _, check := range []func() error{k.replicaWrites, k.podDeletions, k.diskDeletions, k.buckets, k.twins} {
		if err := check(); err != nil {
			return err
		}
	}
	k.count(C11Restart)
	return nil
}

func (k *Checker) replicaWrites() error {
	writes := k.c.ReplicaWrites()
	for _, w := range writes[k.replicas:] {
		f := k.c.Fleet(w.Namespace, w.Name)
		switch {
		case w.FleetDeleting:
			continue
		case w.To < w.From:
			k.count(C1ShrinkOneAfterRollout)
			if w.From-w.To != 1 || !w.PrevRolledOut || !w.AllReady() {
				return k.fail(C1ShrinkOneAfterRollout, "%s %s/%s replicas %d -> %d at %s (previous rolled out: %t, members not ready: %d)",
					w.Kind, w.Namespace, w.Name, w.From, w.To, w.Time.Format("15:04:05"), w.PrevRolledOut, w.NotReady)
			}
		case w.To > w.From && f != nil:
			k.count(C2GrowInOneStep)
			target := reservation.TargetFor(&f.Spec, nil, w.From).Members
			if w.To != target {
				return k.fail(C2GrowInOneStep, "%s %s/%s grew %d -> %d but the target is %d", w.Kind, w.Namespace, w.Name, w.From, w.To, target)
			}
		}
	}
	k.replicas = len(writes)
	return nil
}

func (k *Checker) podDeletions() error {
	dels := k.c.PodDeletions()
	perFleet := map[types.UID]int{}
	for _, d := range dels[k.pods:] {
		k.count(C3PodDeletedOnlyToHeal)
		perFleet[d.FleetUID]++
		nodeLost := d.NodeState == sim.NodeGone || d.NodeState == sim.NodeUnreachable || d.NodeState == sim.NodeNotReady
		switch {
		case !d.Preconditioned:
			return k.fail(C3PodDeletedOnlyToHeal, "pod %s deleted without a UID precondition", d.Name)
		case d.OtherNotReady > 0:
			return k.fail(C3PodDeletedOnlyToHeal, "pod %s deleted (%s) while %d other members were not ready", d.Name, d.Reason, d.OtherNotReady)
		case d.WasReady && !nodeLost:
			return k.fail(C3PodDeletedOnlyToHeal, "pod %s was ready on a healthy node and was deleted (%s)", d.Name, d.Reason)
		case d.Force && d.NodeState != sim.NodeGone && !d.NodeFenced:
			// A node that is only NotReady or unreachable may be alive and still run the member.
			return k.fail(C3PodDeletedOnlyToHeal, "pod %s force-deleted though its node %s is %s and not fenced", d.Name, d.Node, d.NodeState)
		case perFleet[d.FleetUID] > 1:
			return k.fail(C3PodDeletedOnlyToHeal, "two pods of fleet %s deleted in one round (%s)", d.FleetUID, d.Name)
		}
	}
	k.pods = len(dels)
	return nil
}

func (k *Checker) diskDeletions() error {
	dels := k.c.DiskDeletions()
	for _, d := range dels[k.disks:] {
		k.count(C4DiskDeletedOnDelete)
		if !d.Preconditioned || !d.FleetExists || !d.FleetDeleting || d.FleetProfile != v1alpha1.ProfilePersistentFleet || d.MemberPods != 0 {
			return k.fail(C4DiskDeletedOnDelete, "disk %s deleted: precondition %t, its fleet %s exists %t deleting %t profile %s, %d member pods",
				d.Name, d.Preconditioned, d.FleetName, d.FleetExists, d.FleetDeleting, d.FleetProfile, d.MemberPods)
		}
	}
	k.disks = len(dels)
	return nil
}

// buckets: a bucket stays bound to the first UID it was reserved to, and no fleet of another UID
// gets a workload.
func (k *Checker) buckets() error {
	for _, o := range k.c.List(sim.KindReservation, "") {
		r := o.(*v1alpha1.CelldReservation)
		k.count(C9OneBucketOneUID)
		if uid, ok := k.bound[r.Spec.Bucket.Name]; ok && uid != r.Spec.FleetUID {
			return k.fail(C9OneBucketOneUID, "bucket %s was bound to %s, now to %s", r.Spec.Bucket.Name, uid, r.Spec.FleetUID)
		}
		k.bound[r.Spec.Bucket.Name] = r.Spec.FleetUID
	}
	for _, o := range k.c.List(sim.KindFleet, "") {
		f := o.(*v1alpha1.CelldFleet)
		if k.c.StatefulSet(f.Namespace, f.Name) == nil && k.c.Deployment(f.Namespace, f.Name) == nil {
			continue
		}
		k.count(C9OneBucketOneUID)
		if uid, ok := k.bound[f.Spec.Bucket.Name]; !ok || uid != f.UID {
			return k.fail(C9OneBucketOneUID, "fleet %s (uid %s) has a workload but bucket %s is bound to %q", f.Name, f.UID, f.Spec.Bucket.Name, uid)
		}
	}
	return nil
}

// twins decides each fleet's current view again with a fresh machine, and with twins of the view
// that must decide the same (status cleared; the request made as a recommendation) or no
// earlier scale-in (history cleared).
func (k *Checker) twins() error {
	for _, key := range k.op.Fleets() {
		ns, name, _ := strings.Cut(key, "/")
		v := events.Normalize(ns, name, k.c.Observe(ns, name))
		if v.Fleet == nil {
			continue
		}
		m := k.twinMachines[key]
		if m == nil {
			m = machine.New()
			k.twinMachines[key] = m
		}
		base := m.Step(&v)
		cleared := v
		f := v.Fleet.DeepCopy()
		f.Status = v1alpha1.CelldFleetStatus{}
		cleared.Fleet = f
		k.count(C5StatusNotRead)
		if a, b := effects(base), effects(m.Step(&cleared)); a != b {
			return k.fail(C5StatusNotRead, "%s decides differently with its status cleared:\n%s\nvs\n%s", key, a, b)
		}
		noHistory := v
		noHistory.Reservation.History = nil
		k.count(C6HistoryClearedSafe)
		if a, b := nextReplicas(&v, base), nextReplicas(&v, m.Step(&noHistory)); b < a {
			return k.fail(C6HistoryClearedSafe, "%s shrinks to %d with its history cleared, to %d with it", key, b, a)
		}
		if !v.Deleting {
			rec := v
			rf := v.Fleet.DeepCopy()
			rf.Spec.Capacity.Mode = v1alpha1.CapacityAuto
			rf.Spec.Capacity.MinMembers, rf.Spec.Capacity.MaxMembers = nil, nil
			rf.Spec.Capacity.TargetUtilization = 50
			rec.Fleet = rf
			rec.Utilization = &events.Utilization{Time: v.Now, Percent: 50, Members: v.Fleet.Spec.Members}
			k.count(C7OnePath)
			if a, b := workloadEffects(base), workloadEffects(m.Step(&rec)); a != b {
				return k.fail(C7OnePath, "%s decides differently when its size is recommended:\n%s\nvs\n%s", key, a, b)
			}
		}
	}
	return nil
}

// effects renders the actions that change the cluster's workloads, Pods, disks, finalizers and
// reservations: what a decision does, apart from what it reports.
func effects(d machine.Decision) string {
	var b strings.Builder
	for _, a := range d.Actions {
		switch a.Kind {
		case machine.PublishStatus, machine.RecordEvent, machine.Requeue:
			continue
		}
		b.WriteString(a.String())
		b.WriteString("\n")
	}
	return b.String()
}

// workloadEffects is effects without the history records, whose source differs by design.
func workloadEffects(d machine.Decision) string {
	var b strings.Builder
	for _, a := range d.Actions {
		switch a.Kind {
		case machine.PublishStatus, machine.RecordEvent, machine.Requeue, machine.AppendHistory:
			continue
		}
		b.WriteString(a.String())
		b.WriteString("\n")
	}
	return b.String()
}

// nextReplicas is the workload size a decision applies, or the current one.
func nextReplicas(v *events.View, d machine.Decision) int32 {
	for _, a := range d.Actions {
		if a.Kind != machine.Apply {
			continue
		}
		switch o := a.Object.(type) {
		case *appsv1.StatefulSet:
			return *o.Spec.Replicas
		case *appsv1.Deployment:
			return *o.Spec.Replicas
		}
	}
	return v.Workload.Replicas
}

// Converged checks liveness and idempotence at the end of a sequence: every fleet not being
// deleted is Steady and Ready at its target, every deleted fleet is gone, and a full resync makes
// the operator write nothing.
func (k *Checker) Converged() error {
	for _, o := range k.c.List(sim.KindFleet, "") {
		f := o.(*v1alpha1.CelldFleet)
		k.count(C10Liveness)
		if f.DeletionTimestamp != nil {
			return k.fail(C10Liveness, "fleet %s is still being deleted: %s", f.Name, f.Status.BlockedBy)
		}
		if k.bound[f.Spec.Bucket.Name] != f.UID {
			continue // refused its bucket: nothing to converge
		}
		replicas := int32(-1)
		if s := k.c.StatefulSet(f.Namespace, f.Name); s != nil {
			replicas = *s.Spec.Replicas
		} else if d := k.c.Deployment(f.Namespace, f.Name); d != nil {
			replicas = *d.Spec.Replicas
		}
		if f.Status.State != v1alpha1.StateSteady || replicas != f.Spec.Members || !ready(f) {
			return k.fail(C10Liveness, "fleet %s is %s with %d replicas (target %d), ready %t, blocked by %q",
				f.Name, f.Status.State, replicas, f.Spec.Members, ready(f), f.Status.BlockedBy)
		}
	}
	before := len(k.c.Writes())
	k.op.Feed(k.c.Resync())
	k.op.Sync(k.c)
	k.op.Feed(k.c.Resync())
	k.op.Sync(k.c)
	k.count(C8Idempotent)
	if after := k.c.Writes(); len(after) != before {
		return k.fail(C8Idempotent, "a converged cluster got %d writes on resync, first %s %s %s/%s",
			len(after)-before, after[before].Verb, after[before].Resource, after[before].Namespace, after[before].Name)
	}
	return nil
}

func ready(f *v1alpha1.CelldFleet) bool {
	for _, c := range f.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c.Status == "True"
		}
	}
	return false
}
