package harness

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
	"github.com/celld/celld-operator/proptest/judge"
)

// The clauses of the safety contract (SPEC section 5), as the judges name them.
const (
	C1ShrinkOneAfterRollout = judge.C1ShrinkOneAfterRollout
	C2GrowInOneStep         = judge.C2GrowInOneStep
	C3PodDeletedOnlyToHeal  = judge.C3PodDeletedOnlyToHeal
	C4DiskDeletedOnDelete   = judge.C4DiskDeletedOnDelete
	C5StatusNotRead         = judge.C5StatusNotRead
	C6HistoryClearedSafe    = judge.C6HistoryClearedSafe
	C7OnePath               = judge.C7OnePath
	C8Idempotent            = judge.C8Idempotent
	C9OneBucketOneUID       = judge.C9OneBucketOneUID
	C10Liveness             = judge.C10Liveness
	C11Restart              = judge.C11Restart
)

// Violation is a broken clause.
type Violation = judge.Violation

// Checker checks the contract: the independent judges (package judge) on what the cluster
// recorded, and twins of the operator's own decisions for the clauses about how it decides
// (5, 6, 7), each twin decided by a fresh machine: no memo, no quiet cache.
type Checker struct {
	c  *sim.Cluster
	op *Operator
	J  *judge.Judge
	// seen is the fingerprint of the view each fleet's twins were last decided on; skipped counts
	// the passes since.
	seen    map[events.FleetKey]string
	skipped map[events.FleetKey]int
}

// NewChecker watches a cluster and its operator.
func NewChecker(c *sim.Cluster, op *Operator) *Checker {
	return &Checker{c: c, op: op, J: judge.New(c), seen: map[events.FleetKey]string{}, skipped: map[events.FleetKey]int{}}
}

func fail(clause, format string, args ...any) error {
	return &Violation{Clause: clause, Detail: fmt.Sprintf(format, args...)}
}

// Total is the number of real writes, deletions and decisions judged.
func (k *Checker) Total() int {
	n := 0
	for _, c := range k.J.Judged {
		n += c
	}
	return n
}

// Summary lists, per clause, the real writes, deletions and decisions judged, one line each.
func (k *Checker) Summary() string {
	var b strings.Builder
	for _, c := range judge.Clauses {
		fmt.Fprintf(&b, "  clause %-62s %8d judged\n", c, k.J.Judged[c])
	}
	for _, e := range judge.Extras {
		fmt.Fprintf(&b, "  judged: %-86s %8d\n", e, k.J.Extra[e])
	}
	return b.String()
}

// After judges everything the cluster recorded since the last call, and the operator's decisions
// of this pass against their twins.
func (k *Checker) After(passes []Pass) error {
	if err := k.J.Round(); err != nil {
		return err
	}
	for _, p := range passes {
		if p.Obs == nil {
			continue
		}
		o := p.Obs
		var inputs []string
		if o.Fleet != nil && o.Fleet.Spec.Storage != nil && o.StorageClassKnown && o.StorageClass == nil {
			inputs = append(inputs, "storage class "+o.Fleet.Spec.Storage.StorageClassName+" missing")
		}
		if o.ServiceAccountMissing {
			inputs = append(inputs, "service account "+o.Fleet.Spec.ServiceAccountName+" missing")
		}
		if o.PriorityClassMissing {
			inputs = append(inputs, "priority class "+o.Fleet.Spec.Pod.PriorityClassName+" missing")
		}
		// A refusal is of one generation of the spec: a new spec is tried.
		if r := o.Refused; r != nil && o.Fleet != nil && r.Generation == o.Fleet.Generation {
			inputs = append(inputs, "a spec the API server refused ("+r.Object+")")
		}
		if other := reservedToAnother(o); other != "" {
			inputs = append(inputs, "its bucket reserved to fleet uid "+other)
		}
		if err := k.J.Held(o.Fleet, o.PVCs, inputs, o.Unowned, p.Written()); err != nil {
			return err
		}
		if err := k.J.Unfenced(o.Fleet, o.Now, o.Pods, o.Nodes, o.NodesSynced, p.Written()); err != nil {
			return err
		}
		if err := k.J.Stuck(o.Fleet, o.Now, o.StatefulSet, o.Pods, o.PVCs, o.Nodes, o.NodesSynced, p.Written()); err != nil {
			return err
		}
		if err := k.J.DiskGoing(o.Fleet, o.Pods, o.PVCs, p.Written()); err != nil {
			return err
		}
		if err := k.J.DeletionBlocked(o.Fleet, o.StatefulSet, o.Pods, p.Written()); err != nil {
			return err
		}
		if err := k.J.CannotComeBack(o.Fleet, o.Pods, o.Nodes, o.NodesSynced, p.Written()); err != nil {
			return err
		}
	}
	return k.twins(passes)
}

// reservedToAnother is the fleet UID an operator-made reservation of the fleet's bucket binds
// when none binds this fleet: the bucket is another fleet's, which holds this one. Empty
// otherwise.
func reservedToAnother(o *events.Observation) string {
	if o.Fleet == nil {
		return ""
	}
	other := ""
	for _, r := range o.Reservations {
		if r.Labels["app.kubernetes.io/managed-by"] == "" || r.DeletionTimestamp != nil {
			continue // made by hand, or going: not the operator's word
		}
		if r.Spec.FleetUID == o.Fleet.UID {
			return ""
		}
		other = string(r.Spec.FleetUID)
	}
	return other
}

// twins decides each view the operator decided on again with fresh machines: with the status
// cleared it must decide the same (5); with the history cleared it must not shrink further (6);
// with the same size asked for as a recommendation it must do the same to the workload (7).
func (k *Checker) twins(passes []Pass) error {
	for _, p := range passes {
		if p.Obs == nil || p.Obs.Fleet == nil {
			continue
		}
		ns, name := p.Key.Namespace, p.Key.Name
		did := effects(p.Decision)
		if err := decidedOnItsView(p); err != nil {
			return err
		}
		// Fresh machines cost what the operator's memo saves: a view that changed nothing since
		// the last twins of this fleet, decided to do nothing, is re-checked only now and then
		// (time alone may change a decision).
		fp := obsFingerprint(p.Obs)
		if did == "" && k.seen[p.Key] == fp && k.skipped[p.Key] < 4 {
			k.skipped[p.Key]++
			continue
		}
		k.seen[p.Key], k.skipped[p.Key] = fp, 0

		cleared := *p.Obs
		f := p.Obs.Fleet.DeepCopy()
		f.Status = v1alpha1.CelldFleetStatus{}
		cleared.Fleet = f
		cv := events.Normalize(ns, name, &cleared)
		if did != "" {
			k.J.Count(C5StatusNotRead, 1)
		}
		base := machine.New().Step(&cv)
		if b := effects(base); did != b {
			return fail(C5StatusNotRead, "%s decided, with its memory and its stored status:\n%s\na fresh machine with the status cleared decides:\n%s", p.Key, did, b)
		}

		// The fresh decision on the cleared view is the base of the other twins: by clause 5 it
		// is the operator's own.
		v := cv
		if len(v.Reservation.History) > 0 {
			if v.Workload.Exists && v.Workload.Replicas > v.Fleet.Spec.Members {
				k.J.Count(C6HistoryClearedSafe, 1)
			}
			noHistory := v
			noHistory.Reservation.History = nil
			if a, b := nextReplicas(&v, base), nextReplicas(&v, machine.New().Step(&noHistory)); b < a {
				return fail(C6HistoryClearedSafe, "%s shrinks to %d with its history cleared, to %d with it", p.Key, b, a)
			}
		}
		if v.Deleting || v.Fleet.Spec.Capacity.Mode != v1alpha1.CapacityManual {
			continue
		}
		rec := v
		rf := v.Fleet.DeepCopy()
		rf.Spec.Capacity.Mode = v1alpha1.CapacityAuto
		rf.Spec.Capacity.MinMembers, rf.Spec.Capacity.MaxMembers = nil, nil
		rf.Spec.Capacity.TargetUtilization = 50
		rec.Fleet = rf
		rec.Utilization = &events.Utilization{Time: v.Now, Percent: 50, Members: v.Fleet.Spec.Members}
		a := workloadEffects(base)
		if a != "" {
			k.J.Count(C7OnePath, 1)
		}
		if b := workloadEffects(machine.New().Step(&rec)); a != b {
			return fail(C7OnePath, "%s decides differently when its size is recommended:\n%s\nvs\n%s", p.Key, a, b)
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

// Converged judges liveness from the cluster's Pods and workloads (10), then idempotence: two
// full resyncs make the operator send no mutating request at all (8), nor does a restart at rest
// (11), and the fleets are still settled after.
func (k *Checker) Converged() error {
	if err := k.J.Settled(); err != nil {
		return err
	}
	k.J.CountSettled()
	if err := k.J.AtRest(C8Idempotent, func() {
		for range 2 {
			k.op.Feed(k.c.Resync())
			k.op.Sync(k.c)
		}
	}); err != nil {
		return err
	}
	if err := k.J.AtRest(C11Restart, func() {
		k.op.Restart(k.c)
		k.op.Sync(k.c)
	}); err != nil {
		return err
	}
	return k.J.Settled()
}

// obsFingerprint names every object of an observation by UID and resourceVersion, with the
// utilization and the refusal: two observations with one fingerprint differ at most in time.
func obsFingerprint(o *events.Observation) string {
	var b strings.Builder
	add := func(x interface {
		GetUID() types.UID
		GetResourceVersion() string
	}) {
		b.WriteString(string(x.GetUID()))
		b.WriteByte('@')
		b.WriteString(x.GetResourceVersion())
		b.WriteByte(' ')
	}
	add(o.Fleet)
	for _, x := range o.Reservations {
		add(x)
	}
	for _, x := range o.Rivals {
		add(x)
	}
	if o.StatefulSet != nil {
		add(o.StatefulSet)
	}
	if o.Deployment != nil {
		add(o.Deployment)
	}
	for _, x := range o.Owned {
		add(x)
	}
	for _, x := range o.Pods {
		add(x)
	}
	for _, x := range o.PVCs {
		add(x)
	}
	names := make([]string, 0, len(o.Nodes))
	for n := range o.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		add(o.Nodes[n])
	}
	if o.StorageClass != nil {
		add(o.StorageClass)
	}
	fmt.Fprintf(&b, "%t %t %t %t %v", o.NodesSynced, o.StorageClassKnown, o.ServiceAccountMissing, o.PriorityClassMissing, o.Unowned)
	if u := o.Utilization; u != nil {
		fmt.Fprintf(&b, " util %+v", *u)
	}
	if r := o.Refused; r != nil {
		fmt.Fprintf(&b, " refused %+v", *r)
	}
	return b.String()
}

// decidedOnItsView judges the decision itself, not only what reached the cluster: the premises'
// fresh reads refuse a heal or a scale-in decided on a view that forbids it, which would hide a
// machine that no longer checks. On its own view, the operator must not decide to delete a Pod
// while another member is not ready, nor lower replicas by more than one, or while a member is
// not ready.
func decidedOnItsView(p Pass) error {
	o := p.Obs
	notReady := func(except string) []string {
		var out []string
		for _, pod := range o.Pods {
			if pod.Name == except {
				continue
			}
			ready := pod.DeletionTimestamp == nil
			if ready {
				ready = false
				for _, c := range pod.Status.Conditions {
					if c.Type == "Ready" {
						ready = c.Status == "True"
					}
				}
			}
			if !ready {
				out = append(out, pod.Name)
			}
		}
		return out
	}
	current := int32(-1)
	if o.StatefulSet != nil && o.StatefulSet.Spec.Replicas != nil {
		current = *o.StatefulSet.Spec.Replicas
	} else if o.Deployment != nil && o.Deployment.Spec.Replicas != nil {
		current = *o.Deployment.Spec.Replicas
	}
	for _, a := range p.Decision.Actions {
		switch a.Kind {
		case machine.DeletePod:
			if others := notReady(a.Name); len(others) > 0 {
				return fail(C3PodDeletedOnlyToHeal, "%s decided to delete %s while, in its own view, %v were not ready", p.Key, a.Name, others)
			}
		case machine.Apply:
			next := int32(-1)
			switch w := a.Object.(type) {
			case *appsv1.StatefulSet:
				next = *w.Spec.Replicas
			case *appsv1.Deployment:
				next = *w.Spec.Replicas
			}
			if next < 0 || current < 0 || next >= current || o.Fleet.DeletionTimestamp != nil {
				continue
			}
			if current-next != 1 {
				return fail(C1ShrinkOneAfterRollout, "%s decided replicas %d -> %d on its own view", p.Key, current, next)
			}
			if others := notReady(""); len(others) > 0 {
				return fail(C1ShrinkOneAfterRollout, "%s decided a scale-in while, in its own view, %v were not ready", p.Key, others)
			}
		}
	}
	return nil
}
