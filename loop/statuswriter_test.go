package loop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// fakeStatusServer answers the writer's status writes: each one gets the next resourceVersion.
type fakeStatusServer struct {
	mu   sync.Mutex
	sent []string // key=members, in the order sent
	rv   int
	// fail fails the writes of these keys; gone answers them as a fleet that no longer exists.
	fail, gone map[string]bool
	// block, when set, holds every write until it is closed.
	block chan struct{}
	// inFlight counts the writes of each key being sent; most is the most at once.
	inFlight, most map[string]int
	// cached is the resourceVersion the fleets' cache shows of each key.
	cached map[string]string
}

func newFakeStatusServer() *fakeStatusServer {
	return &fakeStatusServer{rv: 100, fail: map[string]bool{}, gone: map[string]bool{}, inFlight: map[string]int{}, most: map[string]int{}, cached: map[string]string{}}
}

func (s *fakeStatusServer) writer() *StatusWriter {
	return NewStatusWriter(s.send, func(k events.FleetKey) string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.cached[k.String()]
	})
}

func (s *fakeStatusServer) send(ctx context.Context, k events.FleetKey, uid types.UID, st *v1alpha1.CelldFleetStatus) (*v1alpha1.CelldFleet, error) {
	key, ns, name := k.String(), k.Namespace, k.Name
	s.mu.Lock()
	s.inFlight[key]++
	s.most[key] = max(s.most[key], s.inFlight[key])
	block := s.block
	s.mu.Unlock()
	if block != nil {
		<-block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight[key]--
	s.sent = append(s.sent, fmt.Sprintf("%s=%d", key, st.Members.Current))
	switch {
	case s.fail[key]:
		return nil, errors.New("the server refused it")
	case s.gone[key]:
		return nil, nil
	}
	s.rv++
	return &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, ResourceVersion: fmt.Sprint(s.rv)}, Status: *st}, nil
}

// start runs w's workers, always leading, until w stops; the channel closes when they returned.
func (s *fakeStatusServer) start(w *StatusWriter, workers int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		w.Run(workers, func() (context.Context, context.CancelFunc, bool) { return context.Background(), func() {}, true })
		close(done)
	}()
	return done
}

// waitInFlight waits until a write of key is being sent.
func (s *fakeStatusServer) waitInFlight(t *testing.T, key string) {
	t.Helper()
	waitFor(t, "a write of "+key+" in flight", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.inFlight[key] == 1
	})
}

func (s *fakeStatusServer) sentList() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.sent, " ")
}

func fleetNamed(name string) *v1alpha1.CelldFleet {
	return &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "10"},
		Status: v1alpha1.CelldFleetStatus{State: v1alpha1.StateGrowing, Members: v1alpha1.MemberCounts{Current: 3},
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "MembersNotReady"}}}}
}

// progress is f's status with only the member count changed: nothing a reader acts on.
func progress(f *v1alpha1.CelldFleet, current int32) *v1alpha1.CelldFleetStatus {
	st := f.Status.DeepCopy()
	st.Members.Current = current
	return st
}

// arrival is f's status arrived at current members: Steady and Ready.
func arrival(f *v1alpha1.CelldFleet, current int32) *v1alpha1.CelldFleetStatus {
	st := progress(f, current)
	st.State = v1alpha1.StateSteady
	st.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Converged"}}
	return st
}

func TestStatusWriterSendsTheLatestOnly(t *testing.T) {
	s := newFakeStatusServer()
	w := s.writer()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w.Now = func() time.Time { return now }
	var lags []time.Duration
	w.Written = func(lag time.Duration) { lags = append(lags, lag) }
	f := fleetNamed("alpha")
	for n := int32(4); n <= 6; n++ {
		w.Put(key("team", "alpha"), f, &f.Status, progress(f, n))
		now = now.Add(time.Second)
	}
	now = now.Add(2 * time.Second)
	w.drain(context.Background())
	if got := s.sentList(); got != "team/alpha=6" {
		t.Errorf("sent %q; want the latest status once: team/alpha=6", got)
	}
	// The lag runs from the first status handed over, which the one written replaced.
	if len(lags) != 1 || lags[0] != 5*time.Second {
		t.Errorf("lags %v, want one of 5s", lags)
	}
	// The next one's lag starts at its own hand-over.
	w.Put(key("team", "alpha"), f, &f.Status, progress(f, 7))
	now = now.Add(time.Second)
	w.drain(context.Background())
	if len(lags) != 2 || lags[1] != time.Second {
		t.Errorf("lags %v, want 5s then 1s", lags)
	}
}

func TestStatusWriterPutsWhatReadersActOnFirst(t *testing.T) {
	s := newFakeStatusServer()
	w := s.writer()
	a, b, c := fleetNamed("a"), fleetNamed("b"), fleetNamed("c")
	w.Put(key("team", "a"), a, &a.Status, progress(a, 4))
	w.Put(key("team", "b"), b, &b.Status, progress(b, 4))
	w.Put(key("team", "c"), c, &c.Status, arrival(c, 4))
	// b's next status arrives while its progress waits: it moves ahead of a's.
	w.Put(key("team", "b"), b, &b.Status, arrival(b, 5))
	w.drain(context.Background())
	if got, want := s.sentList(), "team/c=4 team/b=5 team/a=4"; got != want {
		t.Errorf("sent %q; want %q: the arrivals first, in the order they came, then the progress", got, want)
	}
}

func TestStatusWriterHasOneWriteInFlightPerFleet(t *testing.T) {
	s := newFakeStatusServer()
	s.block = make(chan struct{})
	w := s.writer()
	f := fleetNamed("alpha")
	done := s.start(w, 4)
	w.Put(key("team", "alpha"), f, &f.Status, progress(f, 4))
	s.waitInFlight(t, "team/alpha")
	// While it is in flight the fleet shows it, and newer ones replace each other.
	if got := shown(w, key("team", "alpha"), f, "10").Status.Members.Current; got != 4 {
		t.Errorf("overlay during the write shows %d members, want the status being written (4)", got)
	}
	w.Put(key("team", "alpha"), f, &f.Status, progress(f, 5))
	w.Put(key("team", "alpha"), f, &f.Status, progress(f, 6))
	if got := shown(w, key("team", "alpha"), f, "10").Status.Members.Current; got != 6 {
		t.Errorf("overlay shows %d members, want the latest handed over (6)", got)
	}
	time.Sleep(20 * time.Millisecond) // room for a second worker to take the fleet, wrongly
	close(s.block)
	w.Stop()
	waitStopped(t, done)
	if got := s.sentList(); got != "team/alpha=4 team/alpha=6" {
		t.Errorf("sent %q; want the one in flight, then the latest: team/alpha=4 team/alpha=6", got)
	}
	if s.most["team/alpha"] != 1 {
		t.Errorf("%d writes of one fleet in flight at once, want 1", s.most["team/alpha"])
	}
}

func TestStatusWriterOverlay(t *testing.T) {
	s := newFakeStatusServer()
	w := s.writer()
	f := fleetNamed("alpha")
	if got := shown(w, key("team", "alpha"), f, "10"); got != f {
		t.Error("with nothing handed over, the overlay is not the fleet itself")
	}
	w.Put(key("team", "alpha"), f, &f.Status, progress(f, 4))
	got := shown(w, key("team", "alpha"), f, "10")
	if got.Status.Members.Current != 4 || f.Status.Members.Current != 3 {
		t.Errorf("overlay of a waiting status: %d members (fleet left at %d); want 4, the fleet untouched", got.Status.Members.Current, f.Status.Members.Current)
	}
	if got.ResourceVersion != f.ResourceVersion || got.UID != f.UID {
		t.Error("the overlay changed more than the status")
	}
	// A fleet recreated under the same name is not shown another's status.
	other := fleetNamed("alpha")
	other.UID = "uid-recreated"
	if shown(w, key("team", "alpha"), other, "10") != other {
		t.Error("the overlay showed a fleet's status on another fleet of the same name")
	}

	// Answered while the caches still show version 10: the answer is shown until they move on.
	s.cached["team/alpha"] = "10"
	w.drain(context.Background())
	if got := shown(w, key("team", "alpha"), f, "10").Status.Members.Current; got != 4 {
		t.Errorf("overlay after the answer, caches behind: %d members, want the answer's 4", got)
	}
	// The caches show a newer version: the fleet as they show it, and the answer is let go.
	newer := f.DeepCopy()
	newer.ResourceVersion = "11"
	if shown(w, key("team", "alpha"), newer, "11") != newer {
		t.Error("the overlay kept the answer once the caches moved on")
	}
	if shown(w, key("team", "alpha"), f, "10") != f {
		t.Error("the answer was kept after the caches moved on once")
	}

	// The caches already show the answer when it comes: nothing is kept.
	w.Put(key("team", "alpha"), f, &f.Status, progress(f, 5))
	s.cached["team/alpha"] = fmt.Sprint(s.rv + 1)
	w.drain(context.Background())
	if shown(w, key("team", "alpha"), f, "10") != f {
		t.Error("the answer was kept though the caches showed it already")
	}
}

// TestStatusWriterAnswerTheCachesMovedPast: a write whose answer comes once the caches show a
// version that is neither the one it was sent on nor the answer (someone cleared the status
// meanwhile) overlays nothing: kept on that version, the answer would hide the clear from every
// sync for as long as nothing else changes. The fleet is synced again instead.
func TestStatusWriterAnswerTheCachesMovedPast(t *testing.T) {
	s := newFakeStatusServer()
	w := s.writer()
	var moved []events.FleetKey
	w.Moved = func(k events.FleetKey) { moved = append(moved, k) }
	ctx := context.Background()
	f := fleetNamed("alpha")
	k := key("team", "alpha")
	s.cached["team/alpha"] = "10"
	w.Put(k, f, &f.Status, progress(f, 4))
	answer, ok := w.SendNext(ctx)
	if !ok {
		t.Fatal("nothing to send")
	}
	// The write is applied (101), then the status cleared (200), and the caches show the clear
	// before the answer comes.
	cleared := f.DeepCopy()
	cleared.ResourceVersion, cleared.Status = "200", v1alpha1.CelldFleetStatus{}
	s.cached["team/alpha"] = "200"
	answer()
	if got := shown(w, k, cleared, "200"); got != cleared {
		t.Errorf("the answer is overlaid on the caches' newer version: %d members, want the cleared status", got.Status.Members.Current)
	}
	if len(moved) != 1 || moved[0] != k {
		t.Errorf("told Moved of %v; want %v once, so the fleet is synced on the caches", moved, k)
	}

	// Sent and answered on one version the caches still show: the answer is overlaid, and no
	// sync is asked for.
	moved = nil
	w.Put(k, cleared, &cleared.Status, progress(cleared, 5))
	w.drain(ctx)
	if got := shown(w, k, cleared, "200"); got.Status.Members.Current != 5 {
		t.Errorf("overlay of an answer the caches lag: %d members, want 5", got.Status.Members.Current)
	}
	if len(moved) != 0 {
		t.Errorf("told Moved of %v for an answer the caches lag", moved)
	}
}

func TestStatusWriterFailure(t *testing.T) {
	s := newFakeStatusServer()
	w := s.writer()
	var failed []string
	w.Failed = func(k events.FleetKey, err error) { failed = append(failed, k.String()) }
	f, g := fleetNamed("alpha"), fleetNamed("gone")
	s.fail["team/alpha"], s.gone["team/gone"] = true, true
	s.cached["team/alpha"], s.cached["team/gone"] = "10", "10"
	w.Put(key("team", "alpha"), f, &f.Status, progress(f, 4))
	w.Put(key("team", "gone"), g, &g.Status, progress(g, 4))
	w.drain(context.Background())
	if strings.Join(failed, " ") != "team/alpha" {
		t.Errorf("failed told of %q; want the refused write (team/alpha) only, not the gone fleet's", failed)
	}
	// A failed write is not shown as made: the next sync sees the fleet without it and asks again.
	if shown(w, key("team", "alpha"), f, "10") != f || shown(w, key("team", "gone"), g, "10") != g {
		t.Error("a failed write, or one to a gone fleet, is still overlaid")
	}
	if w.pending() != 0 {
		t.Errorf("%d statuses still pending, want 0", w.pending())
	}
	w.drain(context.Background())
	if got := s.sentList(); got != "team/alpha=4 team/gone=4" {
		t.Errorf("sent %q; the writer retried on its own (its sync asks again)", got)
	}
}

func TestStatusWriterForget(t *testing.T) {
	s := newFakeStatusServer()
	w := s.writer()
	f := fleetNamed("alpha")
	w.Put(key("team", "alpha"), f, &f.Status, progress(f, 4))
	w.Forget(key("team", "alpha"))
	w.drain(context.Background())
	if got := s.sentList(); got != "" {
		t.Errorf("sent %q for a forgotten fleet", got)
	}
	if shown(w, key("team", "alpha"), f, "10") != f {
		t.Error("a forgotten fleet is overlaid")
	}
}

func TestStatusWriterNotLeading(t *testing.T) {
	s := newFakeStatusServer()
	w := s.writer()
	f := fleetNamed("alpha")
	w.Put(key("team", "alpha"), f, &f.Status, progress(f, 4))
	w.Stop()
	w.Run(2, func() (context.Context, context.CancelFunc, bool) { return context.Background(), func() {}, false })
	if got := s.sentList(); got != "" {
		t.Errorf("a replica that does not lead sent %q", got)
	}
}

// TestStatusWriterRecreatedFleet: a fleet deleted while its status is being written, and created
// again under its name, gets its own status written once that write ends.
func TestStatusWriterRecreatedFleet(t *testing.T) {
	s := newFakeStatusServer()
	s.block = make(chan struct{})
	w := s.writer()
	old := fleetNamed("alpha")
	done := s.start(w, 2)
	w.Put(key("team", "alpha"), old, &old.Status, progress(old, 4))
	s.waitInFlight(t, "team/alpha")
	w.Forget(key("team", "alpha"))
	recreated := fleetNamed("alpha")
	recreated.UID = "uid-recreated"
	w.Put(key("team", "alpha"), recreated, &recreated.Status, progress(recreated, 1))
	close(s.block)
	waitFor(t, "the recreated fleet's status", func() bool { return s.sentList() == "team/alpha=4 team/alpha=1" })
	w.Stop()
	waitStopped(t, done)
	if got := shown(w, key("team", "alpha"), old, "10"); got != old {
		t.Error("the deleted fleet's status is overlaid on it")
	}
}

// shown is the fleet as w's overlay shows it.
func shown(w *StatusWriter, key events.FleetKey, f *v1alpha1.CelldFleet, cachedRV string) *v1alpha1.CelldFleet {
	return w.Overlay(key, f, cachedRV)
}

// drain writes every status waiting, one at a time, on the caller's goroutine.
func (w *StatusWriter) drain(ctx context.Context) {
	for w.WriteNext(ctx) {
	}
}

// pending counts the fleets whose status waits or is being written.
func (w *StatusWriter) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, e := range w.entries {
		if e.next != nil || e.sending != nil {
			n++
		}
	}
	return n
}

// TestStatusWriterArrivalDuringItsFleetsWrite: a status a reader acts on, handed over while the
// fleet's own progress write is in flight, goes next, ahead of the other fleets' progress.
func TestStatusWriterArrivalDuringItsFleetsWrite(t *testing.T) {
	s := newFakeStatusServer()
	s.block = make(chan struct{})
	w := s.writer()
	done := s.start(w, 1)
	x, y, z := fleetNamed("x"), fleetNamed("y"), fleetNamed("z")
	w.Put(key("team", "x"), x, &x.Status, progress(x, 4))
	s.waitInFlight(t, "team/x")
	w.Put(key("team", "y"), y, &y.Status, progress(y, 4))
	w.Put(key("team", "z"), z, &z.Status, progress(z, 4))
	w.Put(key("team", "x"), x, &x.Status, arrival(x, 5))
	close(s.block)
	w.Stop()
	waitStopped(t, done)
	if got, want := s.sentList(), "team/x=4 team/x=5 team/y=4 team/z=4"; got != want {
		t.Errorf("sent %q; want %q: x's arrival as soon as its write in flight is answered", got, want)
	}
}

// TestStatusWriterBoundsPacedWritesInFlight: however many workers are free, at most PacedInFlight
// writes that only update counts are in flight at once, while the statuses readers act on take
// the other workers; every status is still written, the paced ones as places free up.
func TestStatusWriterBoundsPacedWritesInFlight(t *testing.T) {
	s := newFakeStatusServer()
	s.block = make(chan struct{})
	w := s.writer()
	var mu sync.Mutex
	now, most := map[bool]int{}, map[bool]int{}
	send := w.send
	w.send = func(ctx context.Context, k events.FleetKey, uid types.UID, st *v1alpha1.CelldFleetStatus) (*v1alpha1.CelldFleet, error) {
		p := strings.HasPrefix(k.Name, "p")
		mu.Lock()
		now[p]++
		most[p] = max(most[p], now[p])
		mu.Unlock()
		defer func() {
			mu.Lock()
			now[p]--
			mu.Unlock()
		}()
		return send(ctx, k, uid, st)
	}
	inFlight := func(paced bool) int {
		mu.Lock()
		defer mu.Unlock()
		return now[paced]
	}
	done := s.start(w, 8)
	for i := range 6 {
		f := fleetNamed(fmt.Sprintf("p%d", i))
		w.Put(events.KeyOf(f), f, &f.Status, progress(f, 4))
	}
	for i := range 3 {
		f := fleetNamed(fmt.Sprintf("u%d", i))
		w.Put(events.KeyOf(f), f, &f.Status, arrival(f, 4))
	}
	waitFor(t, "the arrivals in flight beside the paced writes", func() bool { return inFlight(false) == 3 && inFlight(true) == PacedInFlight })
	time.Sleep(20 * time.Millisecond) // room for a free worker to take another paced write, wrongly
	if got := inFlight(true); got != PacedInFlight {
		t.Errorf("%d paced writes in flight with workers free, want %d", got, PacedInFlight)
	}
	close(s.block)
	w.Stop()
	waitStopped(t, done)
	if got := len(strings.Fields(s.sentList())); got != 9 {
		t.Errorf("sent %d statuses, want all 9: %s", got, s.sentList())
	}
	if most[true] != PacedInFlight {
		t.Errorf("at most %d paced writes were in flight at once, want %d", most[true], PacedInFlight)
	}
}

// TestStatusWriterStopsWithPacedWritesWaiting: a stop that comes while paced writes wait for a
// place still ends Run once they are written: every worker returns, not only those that happened
// to be woken by the last paced write's end.
func TestStatusWriterStopsWithPacedWritesWaiting(t *testing.T) {
	for range 20 {
		s := newFakeStatusServer()
		s.block = make(chan struct{})
		w := s.writer()
		// Far more idle workers than paced writes: the wake-ups the writes' ends give cannot
		// reach every sleeper by chance.
		done := s.start(w, 32)
		for i := range 3 {
			f := fleetNamed(fmt.Sprintf("p%d", i))
			w.Put(events.KeyOf(f), f, &f.Status, progress(f, 4))
		}
		waitFor(t, "the paced writes in flight", func() bool { return w.Waiting() == 3-PacedInFlight })
		idle := 32 - PacedInFlight
		waitFor(t, "the idle workers asleep", func() bool { n, _ := w.sleepers(); return n == idle })
		_, woken := w.sleepers()
		w.Stop()
		// Stop wakes them all; each finds a paced write waiting for a place and sleeps again.
		// Only then do the writes in flight end, so the wake-ups their ends give are the only
		// ones left to reach the sleepers.
		waitFor(t, "the idle workers woken by Stop and asleep again", func() bool {
			n, now := w.sleepers()
			return n == idle && now == woken+idle
		})
		close(s.block)
		waitStopped(t, done)
		if got := len(strings.Fields(s.sentList())); got != 3 {
			t.Fatalf("sent %d statuses, want all 3: %s", got, s.sentList())
		}
	}
}

// sleepers is how many workers wait on the writer's condition, and how many wake-ups they have
// had.
func (w *StatusWriter) sleepers() (asleep, woken int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.asleep, w.woken
}

// waitStopped waits for the writer's Run to return, and fails rather than hang when it does not.
func waitStopped(t *testing.T, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Stop: a worker still waits")
	}
}

// TestStatusWriterPromotesAPacedFleet: a status readers act on, handed over for a fleet whose
// progress waits among the paced ones, moves that fleet ahead alone: the others keep their order
// and every fleet waits once.
func TestStatusWriterPromotesAPacedFleet(t *testing.T) {
	s := newFakeStatusServer()
	w := s.writer()
	a, b, c := fleetNamed("a"), fleetNamed("b"), fleetNamed("c")
	for _, f := range []*v1alpha1.CelldFleet{a, b, c} {
		w.Put(events.KeyOf(f), f, &f.Status, progress(f, 4))
	}
	w.Put(events.KeyOf(b), b, &b.Status, arrival(b, 5))
	if got := w.Waiting(); got != 3 {
		t.Fatalf("%d statuses waiting, want 3: one per fleet", got)
	}
	for w.WriteNext(context.Background()) {
	}
	if got, want := s.sentList(), "team/b=5 team/a=4 team/c=4"; got != want {
		t.Errorf("sent %q; want %q", got, want)
	}
}

// key is the key of fleet name in namespace.
func key(namespace, name string) events.FleetKey {
	return events.FleetKey{Namespace: namespace, Name: name}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestStatusWriterCountsItsPaths: each path the property tests require is counted when taken,
// and only then, so a run that never takes one fails for it.
func TestStatusWriterCountsItsPaths(t *testing.T) {
	s := newFakeStatusServer()
	w := s.writer()
	var paths pathCount
	w.Path = paths.add
	ctx := context.Background()
	f := fleetNamed("alpha")
	k := key("team", "alpha")
	want := map[string]int{}
	check := func(step string) {
		t.Helper()
		got := paths.get()
		for _, p := range StatusPaths {
			if got[p] != want[p] {
				t.Errorf("after %s: %q counted %d, want %d", step, p, got[p], want[p])
			}
		}
	}
	w.Put(k, f, &f.Status, progress(f, 4))
	check("one status handed over")
	w.Put(k, f, &f.Status, progress(f, 5))
	want[PathCoalesced]++
	check("a second one before the first was sent")
	shown(w, k, f, "10")
	want[PathOverlaidWaiting]++
	check("a sync observing the status not yet sent")

	s.cached["team/alpha"] = "10"
	answer, ok := w.SendNext(ctx)
	if !ok {
		t.Fatal("nothing to send")
	}
	shown(w, k, f, "10")
	want[PathOverlaidWaiting]++
	check("a sync observing the status in flight")
	w.Put(k, f, &f.Status, progress(f, 6))
	want[PathBehindInFlight]++
	check("a status handed over while its fleet's write is in flight")
	answer()
	w.drain(ctx)
	shown(w, k, f, "10")
	want[PathOverlaidAnswered]++
	check("a sync observing an answer the caches lag")
	newer := f.DeepCopy()
	newer.ResourceVersion = "12"
	shown(w, k, newer, "12")
	check("a sync observing the caches caught up")

	s.fail["team/alpha"] = true
	w.Put(k, newer, &newer.Status, progress(newer, 7))
	w.drain(ctx)
	want[PathFailed]++
	check("a failed write")
	shown(w, k, newer, "12")
	check("a sync after the failed write")
}

// pathCount counts the paths a writer or a loop tells of, as the property tests do.
type pathCount struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *pathCount) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[name]++
}

func (c *pathCount) get() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}
