package harness

import (
	"fmt"
	"math/rand/v2"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/events"
)

// Round is how much virtual time one operator pass stands for.
const Round = 5 * time.Second

// Namespace is where the simulated fleets live.
const Namespace = "prod"

// Key is the key of the fleet name in Namespace.
func Key(name string) events.FleetKey { return events.FleetKey{Namespace: Namespace, Name: name} }

// StorageClass is the simulated cluster's storage class.
const StorageClass = "standard"

// GoodImage is an image whose members become ready; BrokenImage is one whose never do.
const (
	GoodImage   = "celld:v1"
	BrokenImage = "celld:broken"
)

// Noise says how the operator's watch misbehaves.
type Noise struct {
	// Duplicate, Reorder and Drop are the chances (0..1) that an event is delivered twice, swapped
	// with its neighbour, or lost until the next resync.
	Duplicate, Reorder, Drop float64
	// Lag is the chance (0..1) that an event is held back one more round: at 0.9 a cache lags
	// about ten rounds, and events of different rounds arrive interleaved.
	Lag float64
}

// World is one simulated cluster, its operator, and the contract checker watching both.
type World struct {
	C       *sim.Cluster
	Op      *Operator
	Check   *Checker
	Noise   Noise
	rng     *rand.Rand
	dropped bool
	nodes   int
	rounds  int
	// pending are events the watch holds back (Noise.Lag).
	pending []sim.Event
	// Adversarial: the operator acts on intermediate states (controllers run only a few steps
	// between its passes), the clock moves unevenly, and the operator restarts at random. Off,
	// every round settles the cluster first: the scripted scenarios read better that way.
	Adversarial bool
	// calm: faults stopped; controllers settle before the operator acts, the watch is clean.
	calm bool
	// Faults counts, per fault kind, how often it occurred.
	Faults map[string]int
	// scheduled are faults that unfold over time (a machine dies, its node goes unknown after
	// the node monitor's grace period, and is deleted later).
	scheduled []scheduledFault
	// foreign are objects made by hand under the fleets' names, removed when faults stop.
	foreign []foreignObject
	// Trace receives a line per user action, fault and decision; nil discards.
	Trace func(line string)
	// writesFrom is the first request the script's next writes command counts.
	writesFrom int
}

// NewWorld builds a cluster with nodes spread over three zones and an operator on it. seed makes
// the event noise reproducible.
func NewWorld(nodes int, seed uint64) *World {
	c := sim.New(sim.Options{OrphanPodGCAfter: 40 * time.Second, EvictAfter: 60 * time.Second})
	c.BreakImage(BrokenImage)
	w := &World{C: c, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), Faults: map[string]int{}}
	for i := 0; i < nodes; i++ {
		w.AddNode()
	}
	if err := c.AddStorageClass(StorageClass, false); err != nil {
		panic(err)
	}
	c.Settle()
	w.Op = NewOperator(c)
	w.Op.Trace = func(l string) { w.tracef("%s", l) }
	w.Check = NewChecker(c, w.Op)
	return w
}

func (w *World) tracef(format string, args ...any) {
	if w.Trace != nil {
		w.Trace(fmt.Sprintf(format, args...))
	}
}

// AddNode adds a healthy node, zones in turn.
func (w *World) AddNode() string {
	w.nodes++
	name := fmt.Sprintf("node-%02d", w.nodes)
	if err := w.C.AddNode(name, fmt.Sprintf("zone-%c", 'a'+rune((w.nodes-1)%3))); err != nil {
		panic(err)
	}
	return name
}

// Step runs n rounds. In a round time passes by an uneven amount; unless faults stopped, the
// cluster's controllers and kubelets run only a few steps (the operator sees the cluster in the
// middle of a change: a rollout half done, a Pod terminating, a claim pending), the watch
// delivers what it lets through, the operator may restart, and the operator's loop acts on its
// caches. The judges judge after every round.
func (w *World) Step(n int) error {
	for i := 0; i < n; i++ {
		w.rounds++
		if w.quiet() {
			w.C.Advance(Round)
		} else {
			w.C.Advance(time.Duration(1+w.rng.IntN(2*int(Round/time.Second))) * time.Second)
		}
		if err := w.runScheduled(); err != nil {
			return err
		}
		w.controllers()
		w.Op.Feed(w.noisy(w.C.Drain()))
		if !w.quiet() && w.rng.IntN(50) == 0 {
			w.Faults[FaultRestart]++
			w.Restart()
		}
		passes := w.Op.Sync(w.C)
		w.writeStatuses()
		w.controllers()
		w.observeFaults()
		if err := w.Check.After(passes); err != nil {
			return err
		}
	}
	return nil
}

func (w *World) quiet() bool { return w.calm || !w.Adversarial }

// writeStatuses runs the operator's status writer: every status waiting once faults stopped;
// otherwise, often, only some of them (most urgent first) or none, or some sent with their
// answers held back for rounds (a slow API server), so that the next syncs observe their fleets
// with a status on its way, hand over newer ones that replace those not yet sent or wait behind
// their fleet's write in flight, and decide on answers the watch has not delivered yet.
func (w *World) writeStatuses() {
	if w.quiet() {
		w.Op.AnswerStatuses(-1)
		w.Op.WriteStatuses(-1)
		return
	}
	w.Op.AnswerStatuses(w.rounds)
	switch w.rng.IntN(4) {
	case 0, 1:
		w.Op.WriteStatuses(-1)
	case 2:
		w.Op.WriteStatuses(w.rng.IntN(w.Op.StatusesWaiting() + 1))
	default:
		hold := 1 + w.rng.IntN(8)
		if w.rng.IntN(8) == 0 {
			hold = 10 + w.rng.IntN(40)
		}
		w.Op.HoldStatuses(1+w.rng.IntN(w.Op.StatusesWaiting()+1), w.rounds+hold)
	}
}

// controllers runs the cluster's controllers: to a fixed point once faults stopped, otherwise a
// random number of steps, often none.
func (w *World) controllers() {
	if w.quiet() || w.rng.IntN(5) == 0 {
		w.C.Settle()
		return
	}
	for range w.rng.IntN(4) {
		if !w.C.Tick() {
			return
		}
	}
}

// Rounds counts the rounds run.
func (w *World) Rounds() int { return w.rounds }

// noisy plays a flaky watch over the events; a drop is repaired by a resync, as an informer's
// relist repairs it.
func (w *World) noisy(evs []sim.Event) []sim.Event {
	n := w.Noise
	if n.Lag > 0 {
		// Held events wait in pending; what is let through this round may be older or newer
		// than what is still held: reordered across batches.
		all := append(w.pending, evs...)
		w.pending = nil
		evs = nil
		for _, ev := range all {
			if w.rng.Float64() < n.Lag {
				w.pending = append(w.pending, ev)
			} else {
				evs = append(evs, ev)
			}
		}
	}
	if n.Duplicate == 0 && n.Reorder == 0 && n.Drop == 0 {
		return evs
	}
	out := make([]sim.Event, 0, len(evs))
	for _, ev := range evs {
		switch r := w.rng.Float64(); {
		case r < n.Drop:
			w.dropped = true
			continue
		case r < n.Drop+n.Duplicate:
			out = append(out, ev)
		}
		out = append(out, ev)
	}
	for i := 1; i < len(out); i++ {
		if w.rng.Float64() < n.Reorder {
			out[i-1], out[i] = out[i], out[i-1]
		}
	}
	if w.dropped && w.rng.Float64() < 0.3 {
		w.dropped = false
		out = append(out, w.C.Resync()...)
	}
	return out
}

// Resync delivers a full relist to the operator, as an informer's periodic resync does; what
// the watch held back is delivered first.
func (w *World) Resync() {
	w.dropped = false
	w.Op.Feed(w.pending)
	w.pending = nil
	w.Op.Feed(w.C.Resync())
}

// Restart restarts the operator: everything in memory is lost, and its new caches list the
// cluster (the old watch's held events are lost with it).
func (w *World) Restart() {
	w.tracef("%s operator restarted", w.C.Now().Format("15:04:05"))
	w.pending = nil
	w.Op.Restart(w.C)
	w.Check.J.Restarted()
}

// FleetSpec describes a fleet to create.
type FleetSpec struct {
	Name    string
	Profile v1alpha1.Profile
	Members int32
	Bucket  string
	// Endpoint and Region say where the bucket lives: spellings of one store are one bucket.
	Endpoint, Region string
	// Workload is Deployment or OrderedStatefulSet for Bucket fleets.
	Workload      v1alpha1.WorkloadKind
	Stabilization time.Duration
	Grace         time.Duration
}

// NewFleet renders a fleet manifest as a user would write it.
func NewFleet(s FleetSpec) *v1alpha1.CelldFleet {
	f := &v1alpha1.CelldFleet{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "CelldFleet"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: Namespace},
		Spec: v1alpha1.CelldFleetSpec{
			Profile: s.Profile, Members: s.Members, Image: GoodImage,
			Bucket:   v1alpha1.BucketSpec{Name: s.Bucket, Region: orText(s.Region, "us-east-1"), Endpoint: s.Endpoint},
			Capacity: v1alpha1.CapacitySpec{Mode: v1alpha1.CapacityManual, ScaleInStabilization: &metav1.Duration{Duration: s.Stabilization}},
			Healing:  v1alpha1.HealingSpec{UnreachableGracePeriod: &metav1.Duration{Duration: s.Grace}},
		},
	}
	if s.Profile == v1alpha1.ProfilePersistentFleet {
		f.Spec.Storage = &v1alpha1.StorageSpec{StorageClassName: StorageClass, Size: resource.MustParse("10Gi")}
	} else {
		f.Spec.Workload = s.Workload
	}
	return f
}

// CreateFleet creates a fleet as a user does.
func (w *World) CreateFleet(s FleetSpec) error {
	w.tracef("%s user creates %s/%s %s members=%d bucket=%s", w.C.Now().Format("15:04:05"), Namespace, s.Name, s.Profile, s.Members, s.Bucket)
	_, err := w.C.CreateFleet(NewFleet(s))
	return err
}

// Scale sets a fleet's members as `kubectl scale` does.
func (w *World) Scale(name string, n int32) error {
	w.tracef("%s user scales %s/%s to %d", w.C.Now().Format("15:04:05"), Namespace, name, n)
	return w.C.Scale(Namespace, name, n)
}

// SetImage changes a fleet's image.
func (w *World) SetImage(name, image string) error {
	w.tracef("%s user sets %s/%s image %s", w.C.Now().Format("15:04:05"), Namespace, name, image)
	return w.C.UpdateFleetSpec(Namespace, name, func(s *v1alpha1.CelldFleetSpec) { s.Image = image })
}

// SetCanary stages a fleet's rollouts at n canary members (spec.rollout.canary), or stops
// staging them when n is 0.
func (w *World) SetCanary(name string, n int32) error {
	w.tracef("%s user sets %s/%s rollout canary %d", w.C.Now().Format("15:04:05"), Namespace, name, n)
	return w.C.UpdateFleetSpec(Namespace, name, func(s *v1alpha1.CelldFleetSpec) {
		s.Rollout = nil
		if n > 0 {
			s.Rollout = &v1alpha1.RolloutSpec{Canary: n}
		}
	})
}

// SetHibernate puts a fleet to sleep (spec.hibernate true) or wakes it.
func (w *World) SetHibernate(name string, hibernate bool) error {
	w.tracef("%s user sets %s/%s hibernate %t", w.C.Now().Format("15:04:05"), Namespace, name, hibernate)
	return w.C.SetHibernate(Namespace, name, hibernate)
}

// ApproveRollout approves the held rollout the fleet's status shows, as kubectl celld rollout
// approve does: with the revision the status names, so a later change holds again. It reports
// whether there was one.
func (w *World) ApproveRollout(name string) (bool, error) {
	f := w.C.Fleet(Namespace, name)
	if f == nil || f.Status.Rollout == nil || !f.Status.Rollout.Held {
		return false, nil
	}
	rev := f.Status.Rollout.Revision
	w.tracef("%s user approves %s/%s rollout of %s", w.C.Now().Format("15:04:05"), Namespace, name, rev)
	return true, w.C.AnnotateFleet(Namespace, name, v1alpha1.AnnotationRolloutApproved, rev)
}

// GrowDisks raises a fleet's spec.storage.size.
func (w *World) GrowDisks(name string, size resource.Quantity) error {
	w.tracef("%s user grows %s/%s disks to %s", w.C.Now().Format("15:04:05"), Namespace, name, size.String())
	return w.C.UpdateFleetSpec(Namespace, name, func(s *v1alpha1.CelldFleetSpec) {
		if s.Storage != nil {
			s.Storage.Size = size
		}
	})
}

// Delete requests a fleet's deletion.
func (w *World) Delete(name string) error {
	w.tracef("%s user deletes %s/%s", w.C.Now().Format("15:04:05"), Namespace, name)
	return w.C.DeleteFleet(Namespace, name)
}

// Fault injects a named fault and traces it.
func (w *World) Fault(what string, fn func() error) error {
	w.tracef("%s fault: %s", w.C.Now().Format("15:04:05"), what)
	return fn()
}

func orText(s, alt string) string {
	if s != "" {
		return s
	}
	return alt
}
