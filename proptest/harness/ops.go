package harness

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/proptest/judge"
	"github.com/celld/celld-operator/render"
)

// Picker draws the random choices of a lifecycle sequence: rapid in tests (so failures shrink and
// replay), a seeded generator in `celld-sim`.
type Picker interface {
	Int(label string, min, max int) int
}

// Seeded is a Picker over a seeded generator.
type Seeded struct{ R *rand.Rand }

// NewSeeded returns a Picker whose choices a seed reproduces.
func NewSeeded(seed uint64) Seeded { return Seeded{R: rand.New(rand.NewPCG(seed, seed^0x5bd1e995))} }

// Int draws from [min, max].
func (s Seeded) Int(_ string, min, max int) int { return min + s.R.IntN(max-min+1) }

// Op is one thing that happens to the cluster in a lifecycle sequence: a user's request, a fault,
// or time passing. Every op lets the operator run a few rounds after it.
type Op struct {
	Name string
	Do   func(w *World, p Picker) error
}

// fleetNames are the names sequences use, so that creations, deletions and re-creations collide.
var fleetNames = []string{"alpha", "beta", "gamma"}

// buckets are few, so that fleets compete for them.
var buckets = []string{"bucket-one", "bucket-two", "bucket-three", "bucket-four"}

func pickFleet(w *World, p Picker) string { return fleetNames[p.Int("fleet", 0, len(fleetNames)-1)] }

// member picks an existing member Pod of a fleet, "" when it has none.
func member(w *World, p Picker, fleet string) (pod string, node string) {
	var names []string
	for _, pod := range w.C.Pods(Namespace) {
		if pod.Labels["app.kubernetes.io/instance"] == fleet && pod.Spec.NodeName != "" {
			names = append(names, pod.Name)
		}
	}
	if len(names) == 0 {
		return "", ""
	}
	name := names[p.Int("member", 0, len(names)-1)]
	return name, w.C.Pod(Namespace, name).Spec.NodeName
}

// rounds lets the operator run after an op.
func rounds(w *World, p Picker) error { return w.Step(p.Int("rounds", 1, 8)) }

// Ops are the ops of a lifecycle sequence.
var Ops = []Op{
	{"create", func(w *World, p Picker) error {
		name := pickFleet(w, p)
		if w.C.Fleet(Namespace, name) != nil {
			return rounds(w, p)
		}
		if served, err := w.Reinstall(); err != nil || !served {
			if err != nil {
				return err
			}
			return rounds(w, p)
		}
		s := FleetSpec{Name: name, Members: int32(p.Int("members", 1, 5)), Bucket: buckets[p.Int("bucket", 0, len(buckets)-1)],
			Grace: 20 * time.Second, Stabilization: time.Duration(p.Int("stabilization", 0, 2)) * 15 * time.Second}
		// Where the bucket lives, in any of the spellings people use: two fleets naming one bucket
		// at one store under different spellings must conflict, at two stores must not.
		sp := judge.Spellings[p.Int("endpoint", 0, len(judge.Spellings)-1)]
		s.Endpoint = strings.ReplaceAll(sp.Endpoint, "{bucket}", s.Bucket)
		s.Region = []string{"us-east-1", "eu-west-1"}[p.Int("region", 0, 1)]
		switch p.Int("profile", 0, 2) {
		case 0:
			s.Profile = v1alpha1.ProfilePersistentFleet
		case 1:
			s.Profile, s.Workload = v1alpha1.ProfileBucket, v1alpha1.WorkloadDeployment
		default:
			s.Profile, s.Workload = v1alpha1.ProfileBucket, v1alpha1.WorkloadOrderedStatefulSet
		}
		if err := w.CreateFleet(s); err != nil {
			return err
		}
		return rounds(w, p)
	}},
	{"scale", func(w *World, p Picker) error {
		name := pickFleet(w, p)
		if f := w.C.Fleet(Namespace, name); f != nil && f.DeletionTimestamp == nil {
			n := int32(p.Int("members", 1, 7))
			err := w.Scale(name, n)
			if f.Spec.Hibernate && n != f.Spec.Members {
				// An HPA's write to a sleeping fleet: admission refuses it, and nothing moves.
				if !apierrors.IsInvalid(err) {
					return fmt.Errorf("scale of hibernated fleet %s to %d: admitted (%v); want a refusal", name, n, err)
				}
				err = nil
			}
			if err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"image", func(w *World, p Picker) error {
		name := pickFleet(w, p)
		if f := w.C.Fleet(Namespace, name); f != nil && f.DeletionTimestamp == nil {
			image := []string{GoodImage, "celld:v2", BrokenImage}[p.Int("image", 0, 2)]
			if image == BrokenImage {
				w.Faults[FaultBrokenRollout]++
			}
			if err := w.SetImage(name, image); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"rollout", func(w *World, p Picker) error {
		// A person stages the fleet's rollouts (or stops staging them); only a StatefulSet
		// fleet takes it, as admission refuses it on a Deployment.
		name := pickFleet(w, p)
		if f := w.C.Fleet(Namespace, name); f != nil && f.DeletionTimestamp == nil &&
			(f.Spec.Profile == v1alpha1.ProfilePersistentFleet || f.Spec.Workload == v1alpha1.WorkloadOrderedStatefulSet) {
			if err := w.SetCanary(name, int32(p.Int("canary", 0, 3))); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"hibernate", func(w *World, p Picker) error {
		// A person puts the fleet to sleep, or wakes it (kubectl celld hibernate, wake).
		name := pickFleet(w, p)
		if f := w.C.Fleet(Namespace, name); f != nil && f.DeletionTimestamp == nil {
			if err := w.SetHibernate(name, !f.Spec.Hibernate); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"approve", func(w *World, p Picker) error {
		if _, err := w.ApproveRollout(pickFleet(w, p)); err != nil {
			return err
		}
		return rounds(w, p)
	}},
	{"grow-disks", func(w *World, p Picker) error {
		// A person raises spec.storage.size; the class may forbid expansion for a while, and the
		// resizer may fail on a claim, until faults stop.
		name := pickFleet(w, p)
		f := w.C.Fleet(Namespace, name)
		if f == nil || f.DeletionTimestamp != nil || f.Spec.Storage == nil {
			return rounds(w, p)
		}
		switch p.Int("expansion", 0, 4) {
		case 0:
			w.Faults[FaultExpansionForbidden]++
			if err := w.Fault("storage class "+StorageClass+" forbids expansion", func() error { return w.C.SetVolumeExpansion(StorageClass, false) }); err != nil {
				return err
			}
		case 1:
			claim := fmt.Sprintf("data-%s-%d", name, p.Int("claim", 0, 4))
			w.Faults[FaultExpansionFailed]++
			if err := w.Fault("expanding "+claim+" fails", func() error { w.C.FailExpansion(Namespace, claim, true); return nil }); err != nil {
				return err
			}
		case 2:
			claim := fmt.Sprintf("data-%s-%d", name, p.Int("claim", 0, 4))
			w.Faults[FaultFilesystemOffline]++
			if err := w.Fault("the filesystem of "+claim+" grows only when mounted again", func() error { w.C.GrowFilesystemsOffline(Namespace, claim, true); return nil }); err != nil {
				return err
			}
		}
		w.Faults[FaultDisksGrown]++
		size := f.Spec.Storage.Size.DeepCopy()
		size.Add(resource.MustParse(fmt.Sprintf("%dGi", p.Int("grow", 1, 3))))
		if err := w.GrowDisks(name, size); err != nil {
			return err
		}
		return rounds(w, p)
	}},
	{"delete", func(w *World, p Picker) error {
		name := pickFleet(w, p)
		if f := w.C.Fleet(Namespace, name); f != nil && f.DeletionTimestamp == nil {
			if err := w.Delete(name); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"lose-node", func(w *World, p Picker) error {
		if _, node := member(w, p, pickFleet(w, p)); node != "" && w.C.Node(node) != nil {
			w.loseNode(node, time.Duration(p.Int("delete-after", 0, 12))*10*time.Second)
		}
		return rounds(w, p)
	}},
	{"node-unreachable", func(w *World, p Picker) error {
		// A partition: the node's heartbeats stop, its members keep running.
		if _, node := member(w, p, pickFleet(w, p)); node != "" && w.C.NodeState(node) == sim.NodeReady {
			w.Faults[FaultNodePartitioned]++
			if err := w.Fault("node "+node+" partitioned", func() error { return w.C.SetNodeUnreachable(node) }); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"node-notready", func(w *World, p Picker) error {
		if _, node := member(w, p, pickFleet(w, p)); node != "" && w.C.NodeState(node) == sim.NodeReady {
			w.Faults[FaultNodeNotReady]++
			if err := w.Fault("node "+node+" NotReady", func() error { return w.C.SetNodeNotReady(node) }); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"fence", func(w *World, p Picker) error {
		// A person powers an unhealthy node's machine off and taints the node out-of-service.
		if nodes := w.unhealthyNodes(); len(nodes) > 0 {
			n := nodes[p.Int("node", 0, len(nodes)-1)]
			w.Faults[FaultNodeFenced]++
			if err := w.Fault("node "+n+" fenced out-of-service", func() error { return w.C.FenceNode(n) }); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"lose-disk", func(w *World, p Picker) error {
		fleet := pickFleet(w, p)
		var claims []string
		for _, c := range w.C.PVCs(Namespace) {
			if c.Labels["app.kubernetes.io/instance"] == fleet && c.DeletionTimestamp == nil && c.Status.Phase == "Bound" {
				claims = append(claims, c.Name)
			}
		}
		if len(claims) > 0 {
			name := claims[p.Int("claim", 0, len(claims)-1)]
			w.Faults[FaultVolumeLost]++
			lose := func() error { return w.C.LoseDisk(Namespace, name) }
			what := "volume of " + name + " lost"
			if p.Int("how", 0, 1) == 0 {
				lose = func() error { return w.C.Delete(sim.KindPVC, Namespace, name) }
				what = "someone deletes claim " + name
			}
			if err := w.Fault(what, lose); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"foreign-object", func(w *World, p Picker) error {
		if err := w.createForeign(pickFleet(w, p), p.Int("object", 0, 3)); err != nil {
			return err
		}
		return rounds(w, p)
	}},
	{"foreign-claim", func(w *World, p Picker) error {
		fleet, other := pickFleet(w, p), pickFleet(w, p)
		uid := types.UID("uid-of-a-deleted-fleet")
		if f := w.C.Fleet(Namespace, other); f != nil && other != fleet {
			uid = f.UID
		}
		if p.Int("labelled", 0, 1) == 0 {
			uid = ""
		}
		if err := w.createForeignClaim(fleet, uid); err != nil {
			return err
		}
		return rounds(w, p)
	}},
	{"delete-reservation", func(w *World, p Picker) error {
		if f := w.C.Fleet(Namespace, pickFleet(w, p)); f != nil {
			r := render.ReservationName(f.Spec.Bucket)
			if w.C.Reservation(Namespace, r) != nil {
				w.Faults[FaultReservationDeleted]++
				if err := w.Fault("someone deletes reservation "+r, func() error { return w.C.DeleteReservation(Namespace, r) }); err != nil {
					return err
				}
			}
		}
		return rounds(w, p)
	}},
	{"recreate-reservation", func(w *World, p Picker) error {
		if f := w.C.Fleet(Namespace, pickFleet(w, p)); f != nil {
			if err := w.recreateReservation(render.ReservationName(f.Spec.Bucket)); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"refuse", func(w *World, p Picker) error {
		n := p.Int("refusals", 1, 2)
		w.Faults[FaultAPIRefusal]++
		w.tracef("%s fault: the API server refuses the next %d workload applies", w.C.Now().Format("15:04:05"), n)
		w.C.InjectRefusals(n)
		return rounds(w, p)
	}},
	{"utilization", func(w *World, p Picker) error {
		name := pickFleet(w, p)
		if f := w.C.Fleet(Namespace, name); f != nil && f.DeletionTimestamp == nil {
			mode := []v1alpha1.CapacityMode{v1alpha1.CapacityRecommend, v1alpha1.CapacityAuto, v1alpha1.CapacityManual}[p.Int("mode", 0, 2)]
			percent := int32(p.Int("percent", 5, 150))
			members := f.Spec.Members
			if s := w.C.StatefulSet(Namespace, name); s != nil {
				members = *s.Spec.Replicas
			} else if d := w.C.Deployment(Namespace, name); d != nil {
				members = *d.Spec.Replicas
			}
			switch mode {
			case v1alpha1.CapacityRecommend:
				w.Faults[FaultRecommend]++
			case v1alpha1.CapacityAuto:
				w.Faults[FaultAuto]++
			}
			w.tracef("%s user sets %s capacity %s; utilization %d%% over %d members", w.C.Now().Format("15:04:05"), name, mode, percent, members)
			if err := w.C.UpdateFleetSpec(Namespace, name, func(s *v1alpha1.CelldFleetSpec) {
				s.Capacity.Mode = mode
				lo, hi := int32(1), int32(7)
				s.Capacity.MinMembers, s.Capacity.MaxMembers = &lo, &hi
				s.Capacity.TargetUtilization = 60
			}); err != nil {
				return err
			}
			w.C.SetUtilization(Namespace, name, events.Utilization{Percent: percent, Members: members})
		}
		return rounds(w, p)
	}},
	{"node-back", func(w *World, p Picker) error {
		for _, n := range w.unhealthyNodes() {
			if err := w.Fault("node "+n+" back", func() error { return w.C.SetNodeReady(n) }); err != nil {
				return err
			}
			break
		}
		return rounds(w, p)
	}},
	{"crash", func(w *World, p Picker) error {
		if pod, _ := member(w, p, pickFleet(w, p)); pod != "" {
			w.Faults[FaultCrash]++
			if err := w.Fault("member "+pod+" crashes", func() error { return w.C.CrashMember(Namespace, pod) }); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"restart", func(w *World, p Picker) error {
		w.Faults[FaultRestart]++
		w.Restart()
		return rounds(w, p)
	}},
	{"clear-status", func(w *World, p Picker) error {
		name := pickFleet(w, p)
		if w.C.Fleet(Namespace, name) != nil {
			w.Faults[FaultStatusCleared]++
			w.tracef("%s user clears the status of %s", w.C.Now().Format("15:04:05"), name)
			if err := w.C.ClearStatus(Namespace, name); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"clear-history", func(w *World, p Picker) error {
		name := pickFleet(w, p)
		if f := w.C.Fleet(Namespace, name); f != nil {
			r := render.ReservationName(f.Spec.Bucket)
			if w.C.Reservation(Namespace, r) != nil {
				w.Faults[FaultHistoryCleared]++
				w.tracef("%s user clears the history of reservation %s", w.C.Now().Format("15:04:05"), r)
				if err := w.C.ClearHistory(Namespace, r); err != nil {
					return err
				}
			}
		}
		return rounds(w, p)
	}},
	{"conflicts", func(w *World, p Picker) error {
		n := p.Int("conflicts", 1, 3)
		w.Faults[FaultConflict]++
		w.tracef("%s fault: the next %d writes conflict", w.C.Now().Format("15:04:05"), n)
		w.C.InjectConflicts(n)
		return rounds(w, p)
	}},
	{"noise", func(w *World, p Picker) error {
		pct := func(l string) float64 { return float64(p.Int(l, 0, 20)) / 100 }
		w.Noise = Noise{Duplicate: pct("duplicate"), Reorder: pct("reorder"), Drop: pct("drop"), Lag: float64(p.Int("lag", 0, 9)) / 10}
		w.Faults[FaultWatch]++
		w.tracef("%s fault: watch noise %+v", w.C.Now().Format("15:04:05"), w.Noise)
		return rounds(w, p)
	}},
	{"wait", func(w *World, p Picker) error { return w.Step(p.Int("rounds", 5, 40)) }},
	{"uninstall", func(w *World, p Picker) error {
		// Rarer than the other ops: it ends every fleet of the sequence.
		if p.Int("uninstall", 0, 3) == 0 && len(w.C.List(sim.KindFleet, "")) > 0 && !w.C.Uninstalling() {
			if err := w.Uninstall(); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
}

func (w *World) unhealthyNodes() []string {
	var out []string
	for i := 1; i <= w.nodes; i++ {
		n := fmt.Sprintf("node-%02d", i)
		if s := w.C.NodeState(n); s == sim.NodeUnreachable || s == sim.NodeNotReady {
			out = append(out, n)
		}
	}
	return out
}

func (w *World) cordonedNodes() []string {
	var out []string
	for i := 1; i <= w.nodes; i++ {
		n := fmt.Sprintf("node-%02d", i)
		if node := w.C.Node(n); node != nil && node.Spec.Unschedulable {
			out = append(out, n)
		}
	}
	return out
}

// LivenessBound is how many rounds fleets get to converge once faults stop.
const LivenessBound = 600

// StopFaults ends every fault: nodes come back (lost ones are replaced), images work, fleets on
// the broken image are given a good one, the watch is clean and the operator relists.
func (w *World) StopFaults() error {
	w.tracef("%s faults stop", w.C.Now().Format("15:04:05"))
	w.Noise = Noise{}
	w.calm = true
	for _, s := range w.scheduled {
		if err := w.Fault(s.what, s.fn); err != nil {
			return err
		}
	}
	w.scheduled = nil
	for _, n := range w.unhealthyNodes() {
		if err := w.C.SetNodeReady(n); err != nil {
			return err
		}
	}
	for i := 1; i <= w.nodes; i++ {
		if err := w.C.UnfenceNode(fmt.Sprintf("node-%02d", i)); err != nil {
			return err
		}
	}
	for _, n := range w.cordonedNodes() {
		if err := w.C.Cordon(n, false); err != nil {
			return err
		}
	}
	if err := w.C.SetVolumeExpansion(StorageClass, true); err != nil {
		return err
	}
	w.C.ClearExpansionFailures()
	if err := w.removeForeign(); err != nil {
		return err
	}
	if err := w.removeKeptDisks(); err != nil {
		return err
	}
	w.C.StopInjecting()
	// A claim whose volume is lost never binds again: its user deletes it, and the StatefulSet
	// makes a new one.
	for _, c := range w.C.PVCs(Namespace) {
		if c.Status.Phase == "Lost" && c.DeletionTimestamp == nil {
			if err := w.C.Delete(sim.KindPVC, Namespace, c.Name); err != nil {
				return err
			}
		}
	}
	// The API server refused a workload: its fleet says SpecRefused and waits for a spec that
	// renders something the API server takes, so its user changes the spec.
	for _, r := range w.C.Requests() {
		if r.Err == nil || !apierrors.IsInvalid(r.Err) || r.Action != machine.Apply {
			continue
		}
		if f := w.C.Fleet(Namespace, r.Name); f != nil && f.DeletionTimestamp == nil && f.CreationTimestamp.Time.Before(r.Time.Add(time.Second)) {
			next := "celld:v3"
			if f.Spec.Image == next {
				next = "celld:v2"
			}
			if err := w.SetImage(r.Name, next); err != nil {
				return err
			}
		}
	}
	healthy := 0
	for i := 1; i <= w.nodes; i++ {
		if w.C.NodeState(fmt.Sprintf("node-%02d", i)) == sim.NodeReady {
			healthy++
		}
	}
	for ; healthy < 10; healthy++ {
		w.AddNode()
	}
	for _, name := range fleetNames {
		if f := w.C.Fleet(Namespace, name); f != nil && f.DeletionTimestamp == nil && f.Spec.Image == BrokenImage {
			if err := w.SetImage(name, GoodImage); err != nil {
				return err
			}
		}
	}
	w.Resync()
	return nil
}

// Converge runs rounds until every fleet is settled (Steady and Ready at its target, or gone),
// then checks liveness and idempotence. It fails when the bound runs out.
func (w *World) Converge() error {
	for i := 0; i < LivenessBound; i++ {
		if err := w.Step(1); err != nil {
			return err
		}
		if i%10 == 9 {
			if w.Check.J.Settled() == nil && w.Check.Converged() == nil {
				return nil
			}
			if err := w.unstick(); err != nil {
				return err
			}
		}
	}
	return w.Check.Converged()
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// unstick is the user following Kubernetes' procedure for a StatefulSet stuck on a bad template
// (revert it, then delete the Pods that ran it): the operator heals only one member at a time,
// and only while the others are ready, so with two members stuck it never starts on them.
func (w *World) unstick() error {
	stuck := map[string][]string{}
	for _, p := range w.C.Pods(Namespace) {
		f := p.Labels["app.kubernetes.io/instance"]
		broken := len(p.Spec.Containers) > 0 && p.Spec.Containers[0].Image == BrokenImage
		if s := w.C.StatefulSet(Namespace, f); s != nil && s.Status.UpdateRevision != "" {
			rev := p.Labels["controller-revision-hash"]
			broken = broken || (rev != "" && rev != s.Status.UpdateRevision && !podReady(p))
		}
		if broken && p.DeletionTimestamp == nil {
			stuck[f] = append(stuck[f], p.Name)
		}
	}
	for _, f := range fleetNames {
		// A held rollout waits for its person: once faults stop, they approve it.
		if _, err := w.ApproveRollout(f); err != nil {
			return err
		}
		if err := w.followApproveAsked(f); err != nil {
			return err
		}
		if err := w.followDeletionBlocked(f); err != nil {
			return err
		}
		if err := w.followMemberLost(f); err != nil {
			return err
		}
		if len(stuck[f]) < 2 {
			continue
		}
		for _, name := range stuck[f] {
			w.tracef("%s user deletes pod %s, stuck on the broken image", w.C.Now().Format("15:04:05"), name)
			// The same person may have just deleted it for a blocked deletion.
			if err := w.C.Delete(sim.KindPod, Namespace, name); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

// DrainOps are node maintenance, as kubectl drain and kubectl uncordon do it: a property test
// runs them beside Ops.
var DrainOps = []Op{
	{"drain", func(w *World, p Picker) error {
		// A node's maintenance as kubectl drain does it: cordon, then evict every member on it
		// through the Eviction API, again while the budget refuses, the operator running in
		// between; then, mostly, uncordon. A node left cordoned waits for "uncordon".
		_, node := member(w, p, pickFleet(w, p))
		if node == "" || w.C.Node(node) == nil {
			return rounds(w, p)
		}
		w.Faults[FaultDrain]++
		if err := w.Fault("node "+node+" cordoned for a drain", func() error { return w.C.Cordon(node, true) }); err != nil {
			return err
		}
		if p.Int("scale-in", 0, 1) == 1 {
			// A scale-in asked for during the drain, as people do: it waits for the node.
			name := pickFleet(w, p)
			if f := w.C.Fleet(Namespace, name); f != nil && f.DeletionTimestamp == nil && !f.Spec.Hibernate && f.Spec.Members > 1 {
				if err := w.Scale(name, f.Spec.Members-1); err != nil {
					return err
				}
			}
		}
		// kubectl drain evicts a node's Pods one after another, other namespaces' first: the
		// operator may run between the cordon and a member's eviction.
		if err := w.Step(p.Int("before-evicting", 0, 4)); err != nil {
			return err
		}
		for try := p.Int("tries", 1, 6); try > 0; try-- {
			for _, pod := range w.C.Pods(Namespace) {
				if pod.Spec.NodeName != node || pod.DeletionTimestamp != nil {
					continue
				}
				ok, err := w.C.Evict(Namespace, pod.Name)
				if err != nil {
					return err
				}
				w.tracef("%s drain of %s: eviction of %s allowed %t", w.C.Now().Format("15:04:05"), node, pod.Name, ok)
				if ok {
					w.Faults[FaultEvictionAllowed]++
				} else {
					w.Faults[FaultEvictionRefused]++
				}
			}
			if err := rounds(w, p); err != nil {
				return err
			}
		}
		if p.Int("uncordon", 0, 2) > 0 && w.C.Node(node) != nil {
			// A node lost meanwhile has nothing left to uncordon.
			return w.Fault("node "+node+" uncordoned", func() error { return w.C.Cordon(node, false) })
		}
		return nil
	}},
	{"uncordon", func(w *World, p Picker) error {
		if nodes := w.cordonedNodes(); len(nodes) > 0 {
			n := nodes[p.Int("node", 0, len(nodes)-1)]
			if err := w.Fault("node "+n+" uncordoned", func() error { return w.C.Cordon(n, false) }); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
}

// countCordonHolds counts the fleets whose scale-in waits for a cordoned node.
func (w *World) countCordonHolds() {
	for _, o := range w.C.List(sim.KindFleet, Namespace) {
		if f := o.(*v1alpha1.CelldFleet); strings.Contains(f.Status.BlockedBy, "to be uncordoned") {
			w.Faults[FaultScaleInCordoned]++
		}
	}
}
