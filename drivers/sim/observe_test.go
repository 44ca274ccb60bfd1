package sim

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// summary renders what an observation holds, by identity and version, so two observations
// compare as text.
func summary(o *events.Observation) string {
	var lines []string
	add := func(kind string, m metav1.Object) {
		lines = append(lines, fmt.Sprintf("%s %s %s rv=%s", kind, m.GetName(), m.GetUID(), m.GetResourceVersion()))
	}
	if o.Fleet != nil {
		add("fleet", o.Fleet)
	}
	if o.StatefulSet != nil {
		add("sts", o.StatefulSet)
	}
	for _, r := range o.Reservations {
		add("reservation", r)
	}
	for _, p := range o.Pods {
		add("pod", p)
	}
	for _, p := range o.PVCs {
		add("pvc", p)
	}
	for _, x := range o.Owned {
		add(string(kinds.Of(x)), x)
	}
	for _, n := range o.Nodes {
		add("node", n)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// busyHistory runs a fleet through growth, a scale-in, a crash, a healed member and a lost node,
// and returns every event it emitted.
func busyHistory(t *testing.T) (*Cluster, []Event) {
	t.Helper()
	c := newCluster(t, 4, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfilePersistentFleet)
	must(t, c.Do(machine.Action{Kind: machine.BindReservation, Key: "bind", Ref: kinds.Ref{Namespace: ns}, Object: &v1alpha1.CelldReservation{
		ObjectMeta: metav1.ObjectMeta{Name: "alpha-bucket", Namespace: ns}, Spec: v1alpha1.CelldReservationSpec{
			FleetName: f.Name, FleetUID: f.UID, Profile: f.Spec.Profile, Bucket: f.Spec.Bucket}}}))
	for _, o := range append(prerequisites(f), statefulSet(f, 3, "celld:v1")) {
		apply(t, c, o)
	}
	runFor(c, 3*time.Minute)
	apply(t, c, statefulSet(f, 2, "celld:v1"))
	runFor(c, time.Minute)
	must(t, c.CrashMember(ns, "alpha-0"))
	runFor(c, time.Minute)
	must(t, c.LoseNode("n2"))
	p := c.Pod(ns, "alpha-1")
	must(t, c.Do(machine.Action{Kind: machine.DeletePod, Key: "heal", Ref: kinds.Ref{Namespace: ns, Name: p.Name}, UID: p.UID, Force: true}))
	runFor(c, 2*time.Minute)
	return c, c.Drain()
}

func fold(evs []Event) *Store {
	s := NewStore()
	for _, ev := range evs {
		s.Apply(ev)
	}
	s.MarkSynced()
	return s
}

func TestFoldedEventsGiveTheClusterTruth(t *testing.T) {
	c, evs := busyHistory(t)
	truth := summary(c.Observe(events.FleetKey{Namespace: ns, Name: "alpha"}))
	if !strings.Contains(truth, "pod alpha-1") || !strings.Contains(truth, "pvc data-alpha-2") {
		t.Fatalf("history too thin to test anything:\n%s", truth)
	}
	if got := summary(fold(evs).Observe(events.FleetKey{Namespace: ns, Name: "alpha"})); got != truth {
		t.Fatalf("folded in order:\n%s\nwant:\n%s", got, truth)
	}
}

// noisy delivers every event twice and, after each, replays an older event drawn at random:
// an informer delivering a stale update. acrossIdentity also replays events of an object that
// was deleted or replaced under the same name since.
func noisy(evs []Event, seed int64, acrossIdentity bool) []Event {
	r := rand.New(rand.NewSource(seed))
	type identity struct {
		uid  string
		gone bool
	}
	latest := map[string]identity{}
	id := func(ev Event) string {
		m := ev.Object.(metav1.Object)
		return fmt.Sprintf("%T %s/%s", ev.Object, m.GetNamespace(), m.GetName())
	}
	var out []Event
	for i, ev := range evs {
		out = append(out, ev, ev)
		if ev.Object != nil {
			latest[id(ev)] = identity{string(ev.Object.(metav1.Object).GetUID()), gone(ev)}
		}
		old := evs[r.Intn(i+1)]
		if old.Object == nil || gone(old) {
			continue
		}
		cur := latest[id(old)]
		if acrossIdentity || (cur.uid == string(old.Object.(metav1.Object).GetUID()) && !cur.gone) {
			out = append(out, old)
		}
	}
	return out
}

func TestDuplicatedAndStaleEventsFoldToTheSameState(t *testing.T) {
	c, evs := busyHistory(t)
	truth := summary(c.Observe(events.FleetKey{Namespace: ns, Name: "alpha"}))
	for seed := int64(1); seed <= 20; seed++ {
		if got := summary(fold(noisy(evs, seed, false)).Observe(events.FleetKey{Namespace: ns, Name: "alpha"})); got != truth {
			t.Fatalf("seed %d: folded with duplicates and stale replays:\n%s\nwant:\n%s", seed, got, truth)
		}
	}
}

// TestStaleEventsOfAReplacedObjectAreDropped: a stale event of a Pod since deleted and recreated
// under the same name must not replace the new Pod, nor one of a Pod since deleted bring it back.
func TestStaleEventsOfAReplacedObjectAreDropped(t *testing.T) {
	c, evs := busyHistory(t)
	truth := summary(c.Observe(events.FleetKey{Namespace: ns, Name: "alpha"}))
	got := summary(fold(noisy(evs, 1, true)).Observe(events.FleetKey{Namespace: ns, Name: "alpha"}))
	if got != truth {
		t.Fatalf("a stale event of a replaced object survived folding:\n%s\nwant:\n%s", got, truth)
	}
}

func TestDroppedEventsAreRecoveredByAResync(t *testing.T) {
	c, evs := busyHistory(t)
	truth := summary(c.Observe(events.FleetKey{Namespace: ns, Name: "alpha"}))
	r := rand.New(rand.NewSource(7))
	var kept []Event
	dropped := 0
	for _, ev := range evs {
		if r.Intn(2) == 0 {
			dropped++
			continue
		}
		kept = append(kept, ev)
	}
	s := fold(kept)
	if got := summary(s.Observe(events.FleetKey{Namespace: ns, Name: "alpha"})); got == truth {
		t.Fatalf("dropping %d of %d events changed nothing: the test proves nothing", dropped, len(evs))
	}
	for _, ev := range c.Resync() {
		s.Apply(ev)
	}
	if got := summary(s.Observe(events.FleetKey{Namespace: ns, Name: "alpha"})); got != truth {
		t.Fatalf("after a resync:\n%s\nwant:\n%s", got, truth)
	}
	// A resync of a converged store changes nothing.
	for _, ev := range c.Resync() {
		s.Apply(ev)
	}
	mustEqual(t, "second resync", summary(s.Observe(events.FleetKey{Namespace: ns, Name: "alpha"})), truth)
}

func gone(ev Event) bool { return ev.Kind == Gone }

func TestTheSameRunGivesTheSameEvents(t *testing.T) {
	render := func(evs []Event) string {
		var b strings.Builder
		for _, ev := range evs {
			fmt.Fprintf(&b, "%s %s", ev.Kind, ev.Time.Format(time.RFC3339))
			if m, ok := ev.Object.(metav1.Object); ok {
				fmt.Fprintf(&b, " %s %s %s", m.GetName(), m.GetUID(), m.GetResourceVersion())
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	_, a := busyHistory(t)
	_, b := busyHistory(t)
	if render(a) != render(b) {
		t.Fatal("two identical runs emitted different events")
	}
}
