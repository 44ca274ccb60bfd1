package kube

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
)

// statusWriter sends the fleets' status writes apart from the syncs that decide them. A sync
// hands the status over and goes on to the next fleet, so no write that moves a fleet waits in
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
type statusWriter struct {
	// send writes st as the status of the fleet (namespace, name, uid) and returns the server's
	// answer; a fleet that is gone answers nil and no error.
	send func(ctx context.Context, namespace, name string, uid types.UID, st *v1alpha1.CelldFleetStatus) (*v1alpha1.CelldFleet, error)
	// cachedRV is the resourceVersion the fleets' cache shows of key, "" when it shows none.
	cachedRV func(key events.FleetKey) string
	// failed is told of a write that failed: the fleet's next sync observes the status it does
	// not show, and asks for it again.
	failed func(key events.FleetKey, err error)
	// written is told, of each write answered, how long its status waited since it was handed
	// over (the oldest hand-over it replaced).
	written func(lag time.Duration)
	// now is the clock; nil is time.Now.
	now func() time.Time

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
	// seq numbers the statuses handed over, so an overlay names the one it shows.
	seq uint64
}

// statusEntry is what the writer holds of one fleet.
type statusEntry struct {
	namespace, name string
	uid             types.UID
	// next is the latest status handed over and not yet sent; nil when none waits. since is when
	// the first status it replaced was handed over.
	next  *v1alpha1.CelldFleetStatus
	since time.Time
	// urgent: next changes what a reader acts on, against the status the fleet showed.
	urgent bool
	// sending is the status of the write in flight; nil when none is.
	sending *v1alpha1.CelldFleetStatus
	// answered is the status the API server last answered with, overlaid while the caches show
	// answeredOn: the resourceVersion they showed when the answer came.
	answered   *v1alpha1.CelldFleetStatus
	answeredOn string
	// nextSeq, sendingSeq and answeredSeq number the three.
	nextSeq, sendingSeq, answeredSeq uint64
}

func newStatusWriter() *statusWriter {
	w := &statusWriter{queued: map[events.FleetKey]bool{}, busy: map[events.FleetKey]bool{}, entries: map[events.FleetKey]*statusEntry{},
		pacedInFlight: pacedInFlight}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// put hands over st, the status the machine asked for f (observed with published), replacing
// any not yet sent.
func (w *statusWriter) put(key events.FleetKey, f *v1alpha1.CelldFleet, published, st *v1alpha1.CelldFleetStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entries[key]
	if e == nil || e.uid != f.UID {
		e = &statusEntry{uid: f.UID}
		w.entries[key] = e
	}
	e.namespace, e.name = f.Namespace, f.Name
	if e.next == nil {
		e.since = w.clock()
	}
	w.seq++
	e.next, e.nextSeq = st.DeepCopy(), w.seq
	e.urgent = machine.ReaderActs(published, st)
	if w.queued[key] {
		if e.urgent && w.promote(key) {
			w.cond.Signal()
		}
		return
	}
	if w.busy[key] {
		return // done requeues it
	}
	w.enqueue(key, e.urgent)
}

// enqueue adds key to a queue. Call with mu held.
func (w *statusWriter) enqueue(key events.FleetKey, urgent bool) {
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
func (w *statusWriter) promote(key events.FleetKey) bool {
	for i, k := range w.paced {
		if k == key {
			w.paced = append(w.paced[:i], w.paced[i+1:]...)
			w.urgent = append(w.urgent, key)
			return true
		}
	}
	return false
}

// pacedInFlight is how many status writes that only update counts or messages may be in flight
// at once. They wait for one another, so their rate follows the API server's answers: under a
// wave of fleets in motion, when every answer is slow, they slow down (and coalesce to each
// fleet's latest) rather than take a quarter of the operator's seats from the writes that move
// fleets; at rest they go as soon as they come.
const pacedInFlight = 2

// pacedFull reports whether the paced writes in flight are at their bound. Call with mu held.
func (w *statusWriter) pacedFull() bool {
	return w.pacedInFlight > 0 && w.pacedNow >= w.pacedInFlight
}

// take takes the key a worker writes next, urgent ones first, a paced one only while fewer than
// pacedInFlight are in flight; ok is false once the writer is stopped and nothing waits. The
// worker calls done(paced) once the write ends.
func (w *statusWriter) take() (key events.FleetKey, paced, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.urgent) == 0 && (len(w.paced) == 0 || w.pacedFull()) {
		if w.stopped && len(w.paced) == 0 {
			return events.FleetKey{}, false, false
		}
		w.cond.Wait()
	}
	if len(w.urgent) > 0 {
		key, w.urgent = w.urgent[0], w.urgent[1:]
	} else {
		key, w.paced, paced = w.paced[0], w.paced[1:], true
		w.pacedNow++
	}
	delete(w.queued, key)
	w.busy[key] = true
	return key, paced, true
}

// done ends a write a worker took: a paced one frees its place for the next.
func (w *statusWriter) done(paced bool) {
	if !paced {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pacedNow--
	w.cond.Signal()
}

// write sends the status waiting for key, if any, and keeps the answer.
func (w *statusWriter) write(ctx context.Context, key events.FleetKey) {
	w.mu.Lock()
	e := w.entries[key]
	if e == nil || e.next == nil {
		delete(w.busy, key)
		w.mu.Unlock()
		return
	}
	st, since, ns, name, uid := e.next, e.since, e.namespace, e.name, e.uid
	e.next, e.sending, e.sendingSeq = nil, st, e.nextSeq
	w.mu.Unlock()

	got, err := w.send(ctx, ns, name, uid, st)
	var cached string
	if err == nil && got != nil {
		// Read before taking the lock: the cache's own lock is never held under the writer's.
		cached = w.cachedRV(key)
	}

	w.mu.Lock()
	w.settle(key, e, got, err, cached)
	w.mu.Unlock()
	switch {
	case err != nil && w.failed != nil:
		w.failed(key, err)
	case err == nil && w.written != nil:
		w.written(w.clock().Sub(since))
	}
}

func (w *statusWriter) clock() time.Time {
	if w.now != nil {
		return w.now()
	}
	return time.Now()
}

// settle keeps what a write of e's status answered: got, or err; cached is the resourceVersion
// the caches showed of the fleet once it came. Call with mu held.
func (w *statusWriter) settle(key events.FleetKey, e *statusEntry, got *v1alpha1.CelldFleet, err error, cached string) {
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
	// A failed write is not shown as made: the fleet's next sync sees the status missing. Nor is
	// an answer the caches show already, or a fleet that is gone.
	if err == nil && got != nil && cached != got.ResourceVersion {
		e.answered, e.answeredOn, e.answeredSeq = got.Status.DeepCopy(), cached, e.sendingSeq
	}
	e.sending = nil
	if e.next != nil {
		w.enqueue(key, e.urgent)
	} else if e.answered == nil {
		delete(w.entries, key)
	}
}

// overlay is f as the writer will have made it: with the status handed over and not yet
// answered, or the answer the caches do not show yet (they show cachedRV, which may be older
// than f: the answer to the sync's own write of the fleet); and the number of the status shown.
// f itself and 0 when the writer holds nothing newer of it.
func (w *statusWriter) overlay(key events.FleetKey, f *v1alpha1.CelldFleet, cachedRV string) (*v1alpha1.CelldFleet, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entries[key]
	if e == nil || e.uid != f.UID {
		return f, 0
	}
	st, seq := e.next, e.nextSeq
	if st == nil {
		st, seq = e.sending, e.sendingSeq
	}
	if st == nil && e.answered != nil {
		if cachedRV != e.answeredOn {
			// The caches moved on: they show the answer, or a write made after it.
			delete(w.entries, key)
			return f, 0
		}
		st, seq = e.answered, e.answeredSeq
	}
	if st == nil {
		return f, 0
	}
	c := *f
	c.Status = *st
	return &c, seq
}

// forget drops what the writer holds of a fleet that is gone; a write in flight finishes.
func (w *statusWriter) forget(key events.FleetKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.entries[key]; e != nil {
		e.next = nil
		delete(w.entries, key)
	}
}

// run writes until stop and then until nothing waits: a status handed over before a shutdown
// is still written. bind gives each write its context; a write bind refuses (the lease is lost)
// is dropped.
func (w *statusWriter) run(workers int, bind func() (context.Context, context.CancelFunc, bool)) {
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

// stop lets the workers return once nothing waits.
func (w *statusWriter) stop() {
	w.mu.Lock()
	w.stopped = true
	w.cond.Broadcast()
	w.mu.Unlock()
}
