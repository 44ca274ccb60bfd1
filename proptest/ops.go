package proptest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/machine"
)

// Picker draws the random choices of a lifecycle sequence: rapid in tests (so failures shrink and
// replay), a seeded generator in `celld-operator simulate`.
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
		s := FleetSpec{Name: name, Members: int32(p.Int("members", 1, 5)), Bucket: buckets[p.Int("bucket", 0, len(buckets)-1)],
			Grace: 20 * time.Second, Stabilization: time.Duration(p.Int("stabilization", 0, 2)) * 15 * time.Second}
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
			if err := w.Scale(name, int32(p.Int("members", 1, 7))); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"image", func(w *World, p Picker) error {
		name := pickFleet(w, p)
		if f := w.C.Fleet(Namespace, name); f != nil && f.DeletionTimestamp == nil {
			image := []string{GoodImage, "celld:v2", BrokenImage}[p.Int("image", 0, 2)]
			if err := w.SetImage(name, image); err != nil {
				return err
			}
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
			if err := w.Fault("lose node "+node, func() error { return w.C.LoseNode(node) }); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"node-unreachable", func(w *World, p Picker) error {
		if _, node := member(w, p, pickFleet(w, p)); node != "" && w.C.NodeState(node) == sim.NodeReady {
			if err := w.Fault("node "+node+" unreachable", func() error { return w.C.SetNodeUnreachable(node) }); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"fence-node", func(w *World, p Picker) error {
		// Someone powers an unhealthy node's machine off and taints it out-of-service.
		if nodes := w.unhealthyNodes(); len(nodes) > 0 {
			n := nodes[p.Int("node", 0, len(nodes)-1)]
			if err := w.Fault("node "+n+" fenced (out-of-service)", func() error { return w.C.FenceNode(n) }); err != nil {
				return err
			}
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
			if err := w.Fault("member "+pod+" crashes", func() error { return w.C.CrashMember(Namespace, pod) }); err != nil {
				return err
			}
		}
		return rounds(w, p)
	}},
	{"restart", func(w *World, p Picker) error {
		w.Restart()
		return rounds(w, p)
	}},
	{"clear-status", func(w *World, p Picker) error {
		name := pickFleet(w, p)
		if w.C.Fleet(Namespace, name) != nil {
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
			r := machine.ReservationName(f.Spec.Bucket)
			if w.C.Reservation(Namespace, r) != nil {
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
		w.tracef("%s fault: the next %d writes conflict", w.C.Now().Format("15:04:05"), n)
		w.C.InjectConflicts(n)
		return rounds(w, p)
	}},
	{"noise", func(w *World, p Picker) error {
		pct := func(l string) float64 { return float64(p.Int(l, 0, 20)) / 100 }
		w.Noise = Noise{Duplicate: pct("duplicate"), Reorder: pct("reorder"), Drop: pct("drop")}
		w.tracef("%s fault: watch noise %+v", w.C.Now().Format("15:04:05"), w.Noise)
		return rounds(w, p)
	}},
	{"wait", func(w *World, p Picker) error { return w.Step(p.Int("rounds", 5, 40)) }},
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

// LivenessBound is how many rounds fleets get to converge once faults stop.
const LivenessBound = 600

// StopFaults ends every fault: nodes come back (lost ones are replaced), images work, fleets on
// the broken image are given a good one, the watch is clean and the operator relists.
func (w *World) StopFaults() error {
	w.tracef("%s faults stop", w.C.Now().Format("15:04:05"))
	w.Noise = Noise{}
	for _, n := range w.unhealthyNodes() {
		if err := w.C.SetNodeReady(n); err != nil {
			return err
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
		if i%10 == 9 && w.Check.Converged() == nil {
			return nil
		}
	}
	return w.Check.Converged()
}
