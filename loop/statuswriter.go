package loop

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
)

// StatusWriter sends the fleets' status writes apart from the syncs that decide them. It is a
// decorator of a Driver (Wrap): the operator runs it with workers against the API server, the
// property tests step it by hand against the simulator (WriteNext), so random sequences run its
// coalescing and its overlay. A sync hands the status over and goes on to the next fleet, so no write that moves a fleet waits in
// the queue behind a status round trip, and a status not yet sent is replaced by a newer one:
// under load the writes coalesce to the latest instead of piling up. A fleet has at most one
// status write in flight. A status that changes what a reader acts on (the state, a condition's
// status) goes ahead of one that only updates counts or messages, and at most pacedInFlight of
// the latter are in flight at once: they take what the API server has to spare, not seats the
// writes that move fleets need.
//
// Until the API server answers, and then until the caches show something newer than they did
// when it answered, the fleet is observed with the status handed over (overlay): the machine
// sees its own write as made, and does not ask for it again.
type StatusWriter struct {
	send     StatusSend
	cachedRV func(key events.FleetKey) string
	// Failed, when set, is told of a write that failed: the fleet's next sync observes the
	// status it does not show, and asks for it again.
	Failed func(key events.FleetKey, err error)
	// Moved, when set, is told of a write answered after the caches moved past the version they
	// showed when it was sent: what they show now may be older than the write or newer (someone
	// else's since), so nothing is overlaid, and the fleet needs a sync that decides on them. The
	// syncs they caused while the write was in flight saw it overlaid.
	Moved func(key events.FleetKey)
	// Written, when set, is told, of each write answered, how long its status waited since it
	// was handed over (the oldest hand-over it replaced).
	Written func(lag time.Duration)
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Path, when set, is told of each path taken, by the names StatusPaths lists (with the
	// writer's lock held: it must not call the writer).
	Path func(name string)

	mu   sync.Mutex
	cond *sync.Cond
	// urgent and paced are the keys waiting for a worker, each at most once in either.
	urgent, paced []events.FleetKey
	queued        map[events.FleetKey]bool
	busy          map[events.FleetKey]bool
	// pacedInFlight bounds the paced writes in flight (0: no bound); pacedNow counts those taken
	// whose write has not ended.
	pacedInFlight, pacedNow int
	entries                 map[events.FleetKey]*statusEntry
	stopped                 bool
	// asleep counts the workers waiting on cond, woken their wake-ups: a stop is whole only once
	// every sleeper has been woken to return, and the shutdown test steps through it on these.
	asleep, woken int
}

// StatusSend writes st as the status of the fleet at key with the given uid (a fleet recreated
// under the name is not written) and returns the server's answer; a fleet that is gone answers
// nil and no error.
type StatusSend func(ctx context.Context, key events.FleetKey, uid types.UID, st *v1alpha1.CelldFleetStatus) (*v1alpha1.CelldFleet, error)

// The writer's paths that random sequences of syncs and writes take, told to Path: the
// property tests fail when one was never taken. (The order of urgent and paced writes, and a
// fleet recreated under its name while its old write is in flight, are the unit tests'.)
const (
	// PathCoalesced: a status handed over replaced one not yet sent.
	PathCoalesced = "status writer: a status replaced one not yet sent (coalesced)"
	// PathBehindInFlight: a status handed over while its fleet's write was in flight waited for
	// it to end.
	PathBehindInFlight = "status writer: a status waited for its fleet's write in flight"
	// PathOverlaidWaiting: a sync observed its fleet with a status handed over and not yet
	// answered.
	PathOverlaidWaiting = "status writer: a sync saw a status not yet answered (overlay)"
	// PathOverlaidAnswered: a sync observed its fleet with an answer the caches did not show yet.
	PathOverlaidAnswered = "status writer: a sync saw an answer the caches lag (overlay)"
	// PathFailed: a write failed, and was not shown as made.
	PathFailed = "status writer: a write failed and was not shown as made"
)

// StatusPaths lists the paths told to Path.
var StatusPaths = []string{PathCoalesced, PathBehindInFlight, PathOverlaidWaiting, PathOverlaidAnswered, PathFailed}

// statusEntry is what the writer holds of one fleet.
type statusEntry struct {
	uid types.UID
	// next is the latest status handed over and not yet sent; nil when none waits. since is when
	// the first status it replaced was handed over.
	next  *v1alpha1.CelldFleetStatus
	since time.Time
	// urgent: next changes what a reader acts on, against the status the fleet showed.
	urgent bool
	// sending is the status of the write in flight; nil when none is. sentOn is the
	// resourceVersion the caches showed of the fleet just before it was sent.
	sending *v1alpha1.CelldFleetStatus
	sentOn  string
	// answered is the status the API server last answered with, overlaid while the caches show
	// answeredOn: the resourceVersion they showed when the answer came, the one they showed when
	// it was sent.
	answered   *v1alpha1.CelldFleetStatus
	answeredOn string
}

// NewStatusWriter is a writer that writes with send; cachedRV is the resourceVersion the
// fleets' cache shows of a key, "" when it shows none.
func NewStatusWriter(send StatusSend, cachedRV func(key events.FleetKey) string) *StatusWriter {
	w := &StatusWriter{send: send, cachedRV: cachedRV, queued: map[events.FleetKey]bool{}, busy: map[events.FleetKey]bool{},
		entries: map[events.FleetKey]*statusEntry{}, pacedInFlight: PacedInFlight}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// Put hands over st, the status the machine asked for f (observed with published), replacing
// any not yet sent.
func (w *StatusWriter) Put(key events.FleetKey, f *v1alpha1.CelldFleet, published, st *v1alpha1.CelldFleetStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entries[key]
	if e == nil || e.uid != f.UID {
		e = &statusEntry{uid: f.UID}
		w.entries[key] = e
	}
	if e.next == nil {
		e.since = w.clock()
	} else {
		w.took(PathCoalesced)
	}
	e.next = st.DeepCopy()
	e.urgent = machine.ReaderActs(published, st)
	if w.queued[key] {
		if e.urgent && w.promote(key) {
			w.cond.Signal()
		}
		return
	}
	if w.busy[key] {
		w.took(PathBehindInFlight)
		return // done requeues it
	}
	w.enqueue(key, e.urgent)
}

// enqueue adds key to a queue. Call with mu held.
func (w *StatusWriter) enqueue(key events.FleetKey, urgent bool) {
	w.queued[key] = true
	if urgent {
		w.urgent = append(w.urgent, key)
	} else {
		w.paced = append(w.paced, key)
	}
	w.cond.Signal()
}

// promote moves a key waiting among the paced ones ahead, reporting whether it moved. Call with
// mu held.
func (w *StatusWriter) promote(key events.FleetKey) bool {
	for i, k := range w.paced {
		if k == key {
			w.paced = append(w.paced[:i], w.paced[i+1:]...)
			w.urgent = append(w.urgent, key)
			return true
		}
	}
	return false
}

// PacedInFlight is how many status writes that only update counts or messages may be in flight
// at once. They wait for one another, so their rate follows the API server's answers: under a
// wave of fleets in motion, when every answer is slow, they slow down (and coalesce to each
// fleet's latest) rather than take a quarter of the operator's seats from the writes that move
// fleets; at rest they go as soon as they come.
const PacedInFlight = 2

// pacedFull reports whether the paced writes in flight are at their bound. Call with mu held.
func (w *StatusWriter) pacedFull() bool {
	return w.pacedInFlight > 0 && w.pacedNow >= w.pacedInFlight
}

// take takes the key a worker writes next, urgent ones first, a paced one only while fewer than
// PacedInFlight are in flight; ok is false once the writer is stopped and nothing waits. The
// worker calls done(paced) once the write ends.
func (w *StatusWriter) take() (key events.FleetKey, paced, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.urgent) == 0 && (len(w.paced) == 0 || w.pacedFull()) {
		if w.stopped && len(w.paced) == 0 {
			// The others may be waiting for a paced place that will never free: wake them to
			// return too, or Run never does and a shutdown hangs.
			w.cond.Broadcast()
			return events.FleetKey{}, false, false
		}
		w.asleep++
		w.cond.Wait()
		w.asleep--
		w.woken++
	}
	key, paced = w.next()
	return key, paced, true
}

// next takes the key written next, urgent ones first; there must be one. Call with mu held.
func (w *StatusWriter) next() (key events.FleetKey, paced bool) {
	if len(w.urgent) > 0 {
		key, w.urgent = w.urgent[0], w.urgent[1:]
	} else {
		key, w.paced, paced = w.paced[0], w.paced[1:], true
		w.pacedNow++
	}
	delete(w.queued, key)
	w.busy[key] = true
	return key, paced
}

// WriteNext writes the status that waits first, urgent ones first, on the caller's goroutine,
// and reports whether one waited. It takes no worker's place: the property tests step a writer
// that runs no workers with it, at the points of a sequence they choose.
func (w *StatusWriter) WriteNext(ctx context.Context) bool {
	answer, ok := w.SendNext(ctx)
	if ok {
		answer()
	}
	return ok
}

// SendNext sends the status that waits first, as WriteNext does, and leaves the write in flight
// until answer is called: the property tests hold an answer back while syncs go on.
func (w *StatusWriter) SendNext(ctx context.Context) (answer func(), ok bool) {
	w.mu.Lock()
	if len(w.urgent) == 0 && len(w.paced) == 0 {
		w.mu.Unlock()
		return nil, false
	}
	key, paced := w.next()
	w.mu.Unlock()
	answered := w.send1(ctx, key)
	return func() {
		answered()
		w.done(paced)
	}, true
}

// Waiting counts the fleets whose status waits for a write.
func (w *StatusWriter) Waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.urgent) + len(w.paced)
}

// Holds reports whether a status of the fleet at key waits to be written, and whether one is
// being written.
func (w *StatusWriter) Holds(key events.FleetKey) (waiting, sending bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.entries[key]; e != nil {
		return e.next != nil, e.sending != nil
	}
	return false, false
}

// took tells Path of a path taken. Call with mu held.
func (w *StatusWriter) took(path string) {
	if w.Path != nil {
		w.Path(path)
	}
}

// done ends a write a worker took: a paced one frees its place for the next.
func (w *StatusWriter) done(paced bool) {
	if !paced {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pacedNow--
	w.cond.Signal()
}

// write sends the status waiting for key, if any, and keeps the answer.
func (w *StatusWriter) write(ctx context.Context, key events.FleetKey) {
	w.send1(ctx, key)()
}

// send1 sends the status waiting for key, if any, and returns what keeps the answer: the write
// is in flight until it is called.
func (w *StatusWriter) send1(ctx context.Context, key events.FleetKey) (answered func()) {
	// Read before taking the lock: the cache's own lock is never held under the writer's. A
	// cache that moves before the write goes only makes the answer look moved past.
	sentOn := w.cachedRV(key)
	w.mu.Lock()
	e := w.entries[key]
	if e == nil || e.next == nil {
		delete(w.busy, key)
		w.mu.Unlock()
		return func() {}
	}
	st, since, uid := e.next, e.since, e.uid
	e.next, e.sending, e.sentOn = nil, st, sentOn
	w.mu.Unlock()

	got, err := w.send(ctx, key, uid, st)
	return func() { w.answered(key, e, since, got, err) }
}

// answered keeps the answer to a write of e's status handed over at since.
func (w *StatusWriter) answered(key events.FleetKey, e *statusEntry, since time.Time, got *v1alpha1.CelldFleet, err error) {
	var cached string
	if err == nil && got != nil {
		// Read before taking the lock: the cache's own lock is never held under the writer's.
		cached = w.cachedRV(key)
	}

	w.mu.Lock()
	moved := w.settle(key, e, got, err, cached)
	w.mu.Unlock()
	switch {
	case err != nil && w.Failed != nil:
		w.Failed(key, err)
	case err == nil && w.Written != nil:
		w.Written(w.clock().Sub(since))
	}
	if moved && w.Moved != nil {
		w.Moved(key)
	}
}

func (w *StatusWriter) clock() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// settle keeps what a write of e's status answered: got, or err; cached is the resourceVersion
// the caches showed of the fleet once it came. moved: the caches showed neither the version the
// write was sent on nor the answer, which is then not overlaid (see Moved). Call with mu held.
func (w *StatusWriter) settle(key events.FleetKey, e *statusEntry, got *v1alpha1.CelldFleet, err error, cached string) (moved bool) {
	delete(w.busy, key)
	if cur := w.entries[key]; cur != e {
		// Forgotten while it was sent (the fleet is gone); a fleet recreated under the name since
		// has its own entry, which waited for this write to end.
		if cur != nil && cur.next != nil {
			w.enqueue(key, true)
		}
		return
	}
	e.answered, e.answeredOn = nil, ""
	if err != nil {
		w.took(PathFailed)
	}
	// A failed write is not shown as made: the fleet's next sync sees the status missing. Nor is
	// an answer the caches show already, or a fleet that is gone. Nor an answer the caches moved
	// past while it was in flight: a version they show that is neither the one the write was
	// sent on nor the answer may be newer than it (the status cleared by someone since), and an
	// overlay kept on it would hide that for as long as nothing else changes.
	switch {
	case err != nil || got == nil || cached == got.ResourceVersion:
	case cached != e.sentOn:
		moved = true
	default:
		e.answered, e.answeredOn = got.Status.DeepCopy(), cached
	}
	e.sending, e.sentOn = nil, ""
	if e.next != nil {
		w.enqueue(key, e.urgent)
	} else if e.answered == nil {
		delete(w.entries, key)
	}
	return moved
}

// Overlay is f as the writer will have made it: with the status handed over and not yet
// answered, or the answer the caches do not show yet (they show cachedRV, which may be older
// than f: the answer to the sync's own write of the fleet). f itself when the writer holds
// nothing newer of it.
func (w *StatusWriter) Overlay(key events.FleetKey, f *v1alpha1.CelldFleet, cachedRV string) *v1alpha1.CelldFleet {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entries[key]
	if e == nil || e.uid != f.UID {
		return f
	}
	st := e.next
	if st == nil {
		st = e.sending
	}
	path := PathOverlaidWaiting
	if st == nil && e.answered != nil {
		if cachedRV != e.answeredOn {
			// The caches moved on: they show the answer, or a write made after it.
			delete(w.entries, key)
			return f
		}
		st, path = e.answered, PathOverlaidAnswered
	}
	if st == nil {
		return f
	}
	w.took(path)
	c := *f
	c.Status = *st
	return &c
}

// Forget drops what the writer holds of a fleet that is gone; a write in flight finishes.
func (w *StatusWriter) Forget(key events.FleetKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.entries[key]; e != nil {
		e.next = nil
		delete(w.entries, key)
	}
}

// Run writes until Stop and then until nothing waits: a status handed over before a shutdown
// is still written. bind gives each write its context; a write bind refuses (the lease is lost)
// is dropped.
func (w *StatusWriter) Run(workers int, bind func() (context.Context, context.CancelFunc, bool)) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				key, paced, ok := w.take()
				if !ok {
					return
				}
				ctx, cancel, ok := bind()
				if !ok {
					w.mu.Lock()
					delete(w.busy, key)
					w.mu.Unlock()
					cancel()
					w.done(paced)
					continue
				}
				w.write(ctx, key)
				cancel()
				w.done(paced)
			}
		})
	}
	wg.Wait()
}

// Stop lets the workers return once nothing waits.
func (w *StatusWriter) Stop() {
	w.mu.Lock()
	w.stopped = true
	w.cond.Broadcast()
	w.mu.Unlock()
}

// Wrap is d with the fleets' statuses handed to w: a PublishStatus goes to Put, every other
// action to d, the loop observes each fleet through w's Overlay, and a fleet that is gone is
// forgotten by w.
func (w *StatusWriter) Wrap(d Driver) Driver { return statusDriver{Driver: d, w: w} }

// statusDriver is a Driver whose statuses a StatusWriter writes.
type statusDriver struct {
	Driver
	w *StatusWriter
}

// Do hands a status to the writer, and sends every other action through the driver.
func (d statusDriver) Do(ctx context.Context, t *Target, a machine.Action) error {
	if a.Kind == machine.PublishStatus && a.Status != nil {
		d.w.Put(events.KeyOf(t.Fleet), t.Fleet, &t.Fleet.Status, a.Status)
		return nil
	}
	return d.Driver.Do(ctx, t, a)
}

// Overlay shows the fleet with the status the writer has yet to write, or the caches to show.
func (d statusDriver) Overlay(key events.FleetKey, f *v1alpha1.CelldFleet, cachedRV string) *v1alpha1.CelldFleet {
	return d.w.Overlay(key, f, cachedRV)
}

// Forget drops what the writer holds of a fleet that is gone.
func (d statusDriver) Forget(key events.FleetKey) { d.w.Forget(key) }
