package contract

import (
	"context"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Seen is one observation of an object: from the initial list, or a watch event.
type Seen struct {
	At   time.Time
	Type watch.EventType
	Obj  runtime.Object
}

// Meta is the object's metadata.
func (s Seen) Meta() metav1.Object {
	m, _ := meta.Accessor(s.Obj)
	return m
}

// Source is how to list and watch one kind.
type Source struct {
	What  string
	List  func(context.Context) (runtime.Object, error)
	Watch cache.WatchFuncWithContext
}

// ListWatch makes a Source of a typed client's List and Watch.
func ListWatch[L runtime.Object](what string, list func(context.Context, metav1.ListOptions) (L, error),
	w func(context.Context, metav1.ListOptions) (watch.Interface, error)) Source {
	return Source{What: what, Watch: w, List: func(ctx context.Context) (runtime.Object, error) {
		return list(ctx, metav1.ListOptions{})
	}}
}

// Recorder keeps every version of the objects of one kind, in order, from a list and a watch
// resumed from its resource version: no intermediate state is skipped.
type Recorder struct {
	What string
	mu   sync.Mutex
	evs  []Seen
	err  error
	done chan struct{}
	// known is the last version of every live object (the relisting recorder's memory).
	known   map[types.UID]runtime.Object
	relists int
}

// Record starts a Recorder of s until ctx ends or the test is cleaned up. The watch's retries
// resume from the last resource version seen; a watch that is refused (the API server's history
// no longer reaches that version) fails the test when its events are next read.
func Record(ctx context.Context, t testing.TB, s Source) *Recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	r := &Recorder{What: s.What, done: make(chan struct{})}
	rv, err := r.list(ctx, s.List, false)
	if err != nil {
		cancel()
		t.Fatalf("list %s: %v", s.What, err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: s.Watch})
	if err != nil {
		cancel()
		t.Fatalf("watch %s: %v", s.What, err)
	}
	go func() {
		defer close(r.done)
		defer w.Stop()
		if err := r.consume(ctx, w); err != nil {
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// RecordAcrossRestarts is a Recorder that survives an API server restart. A new API server's
// watch cache starts at the store's current revision, so a watch resumed from an older resource
// version is refused (410 Gone): the recorder then lists again, as an informer does, records what
// it finds and what vanished, and watches on. What changed between the last event and the new
// list is seen as one change. logf reports a watch error other than Gone.
func RecordAcrossRestarts(ctx context.Context, t testing.TB, s Source, logf func(string, ...any)) *Recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	r := &Recorder{What: s.What, done: make(chan struct{}), known: map[types.UID]runtime.Object{}}
	rv, err := r.list(ctx, s.List, false)
	if err != nil {
		cancel()
		t.Fatalf("list %s: %v", s.What, err)
	}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: s.Watch})
			if err != nil {
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
				return
			}
			if err := r.consume(ctx, w); err != nil && !apierrors.IsGone(err) && !apierrors.IsResourceExpired(err) {
				logf("watch of %s: %v; listing again", r.What, err)
			}
			w.Stop()
			for ctx.Err() == nil {
				if rv, err = r.list(ctx, s.List, true); err == nil {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// consume records the watch's events until ctx ends, the watch closes, or it reports an error,
// which it returns.
func (r *Recorder) consume(ctx context.Context, w watch.Interface) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				r.add(ev.Type, ev.Object)
			case watch.Error:
				return apierrors.FromObject(ev.Object)
			}
		}
	}
}

func (r *Recorder) add(typ watch.EventType, obj runtime.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, Seen{At: time.Now(), Type: typ, Obj: obj})
	if r.known == nil {
		return
	}
	m, _ := meta.Accessor(obj)
	if typ == watch.Deleted {
		delete(r.known, m.GetUID())
	} else {
		r.known[m.GetUID()] = obj
	}
}

// list records every object listed, all stamped with the one time the list returned, and returns
// the list's resource version. A relist records the objects as modified, and a deletion of every
// known object the list lacks.
func (r *Recorder) list(ctx context.Context, list func(context.Context) (runtime.Object, error), relist bool) (string, error) {
	l, err := list(ctx)
	if err != nil {
		return "", err
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return "", err
	}
	typ := watch.Added
	if relist {
		typ = watch.Modified
	}
	now := time.Now()
	listed := map[types.UID]bool{}
	r.mu.Lock()
	for _, o := range items {
		m, err := meta.Accessor(o)
		if err != nil {
			r.mu.Unlock()
			return "", err
		}
		listed[m.GetUID()] = true
		r.evs = append(r.evs, Seen{At: now, Type: typ, Obj: o})
		if r.known != nil {
			r.known[m.GetUID()] = o
		}
	}
	var vanished []runtime.Object
	for uid, o := range r.known {
		if !listed[uid] {
			vanished = append(vanished, o)
		}
	}
	if relist {
		r.relists++
	}
	r.mu.Unlock()
	for _, o := range vanished {
		r.add(watch.Deleted, o)
	}
	lm, err := meta.ListAccessor(l)
	if err != nil {
		return "", err
	}
	return lm.GetResourceVersion(), nil
}

// Events returns what was seen so far, failing the test if the watch broke.
func (r *Recorder) Events(t testing.TB) []Seen {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		t.Fatalf("watch of %s failed: %v", r.What, r.err)
	}
	return append([]Seen(nil), r.evs...)
}

// Relists is how many times the recorder listed again after a refused watch.
func (r *Recorder) Relists() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.relists
}

// Await waits until what the recorder saw satisfies ok, and returns it: a read can show a change
// before the watch delivers it.
func (r *Recorder) Await(t testing.TB, what string, ok func([]Seen) bool) []Seen {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs := r.Events(t)
		if ok(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch of %s: %s: not seen within 30s", r.What, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
