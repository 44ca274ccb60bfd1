package kube

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/proptest/harness"
)

// TestObserveTwinsAgree: one events.Gather reads the informer caches (Informers.Observe) and the
// simulator's store (sim.Store.Observe, what the property tests feed the loop); the two
// caches must hold the same objects under the same indexes, so that Gather gives the same
// observation of every fleet, on the objects random lifecycle sequences leave in the simulator:
// foreign workloads and disks under a fleet's name, rivals for a bucket, terminating members,
// lost nodes. The property tests prove the contract on the store; this proves it of the caches.
func TestObserveTwinsAgree(t *testing.T) {
	compared := 0
	eachWorld(t, func(w *harness.World, _ uint64) { compared += compareObservations(t, w) })
	if compared < 100 {
		t.Fatalf("only %d observations compared", compared)
	}
}

// eachWorld walks six adversarial random lifecycle sequences of 25 operations each (seeds 1 to
// 6, the first operation a creation) and calls visit after every operation.
func eachWorld(t *testing.T, visit func(w *harness.World, seed uint64)) {
	t.Helper()
	for seed := uint64(1); seed <= 6; seed++ {
		w := harness.NewWorld(10, seed)
		w.Adversarial = true
		p := harness.NewSeeded(seed)
		for step := 0; step < 25; step++ {
			op := harness.Ops[p.Int("op", 0, len(harness.Ops)-1)]
			if step == 0 {
				op = harness.Ops[0]
			}
			if err := op.Do(w, p); err != nil {
				t.Fatalf("seed %d step %d %s: %v", seed, step, op.Name, err)
			}
			visit(w, seed)
		}
	}
}

func compareObservations(t *testing.T, w *harness.World) int {
	t.Helper()
	var objs []any
	for _, ev := range w.C.Resync() {
		if ev.Object == nil || ev.Kind == sim.Gone {
			continue
		}
		objs = append(objs, ev.Object)
	}
	inf := testInformers(t, objs...)
	store := sim.NewStore()
	for _, ev := range w.C.Resync() {
		store.Apply(ev)
	}
	store.MarkSynced()
	n := 0
	for _, k := range store.Fleets() {
		want := store.Observe(k)
		// The test's informers never start, so they never sync: read as synced, as the store
		// is, they must hold the same objects under the same indexes.
		got, err := events.Gather(synced{inf}, k, want.Now, want.Utilization)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := describeObservation(got), describeObservation(want); g != w {
			t.Fatalf("%s: the informers observe\n%s\nthe simulator's store observes\n%s", k, g, w)
		}
		n++
	}
	return n
}

// describeObservation names every object an observation holds by kind, namespace, name, UID and
// resourceVersion: which objects belong to a fleet, in which version, is what the twins must
// agree on.
func describeObservation(o *events.Observation) string {
	var b strings.Builder
	add := func(label string, x metav1.Object) {
		if x == nil || reflect.ValueOf(x).IsNil() {
			fmt.Fprintf(&b, "%s: none\n", label)
			return
		}
		fmt.Fprintf(&b, "%s: %s/%s uid=%s rv=%s\n", label, x.GetNamespace(), x.GetName(), x.GetUID(), x.GetResourceVersion())
	}
	fmt.Fprintf(&b, "now %s synced %t/%t sa-missing %t pc-missing %t unowned %v\n", o.Now, o.NodesSynced, o.StorageClassKnown, o.ServiceAccountMissing, o.PriorityClassMissing, o.Unowned)
	if o.Utilization != nil {
		fmt.Fprintf(&b, "utilization %+v\n", *o.Utilization)
	}
	if o.Fleet != nil {
		add("fleet", o.Fleet)
	}
	for _, x := range o.Reservations {
		add("reservation", x)
	}
	for _, x := range o.Rivals {
		add("rival", x)
	}
	add("statefulset", o.StatefulSet)
	add("deployment", o.Deployment)
	for _, x := range o.Owned {
		add(string(kinds.Of(x)), x)
	}
	for _, x := range o.Pods {
		add("pod", x)
	}
	for _, x := range o.PVCs {
		add("claim", x)
	}
	nodes := make([]string, 0, len(o.Nodes))
	for n := range o.Nodes {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		add("node", o.Nodes[n])
	}
	add("storageclass", o.StorageClass)
	return b.String()
}

// synced reads a test's informers as synced.
type synced struct{ *Informers }

func (synced) Synced(kinds.Kind) bool { return true }
