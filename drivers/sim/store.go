package sim

import (
	"fmt"
	"slices"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
)

// EventKind names what an event says happened. The object's own kind is in the object (kinds.Of).
type EventKind string

// The normalized events: the store needs to tell no more apart.
const (
	// Observed: the object exists as Object shows (a fleet being deleted included).
	Observed EventKind = "Observed"
	// Gone: the object was deleted; Object is its last known state.
	Gone EventKind = "Gone"
	// UtilizationObserved: Utilization was sampled for Fleet.
	UtilizationObserved EventKind = "UtilizationObserved"
	// TimePassed only moves time on.
	TimePassed EventKind = "TimePassed"
)

// Event is one normalized observation. Object is the typed Kubernetes object (its last known
// state for a Gone event); Time is when it was observed and is the machine's only clock.
type Event struct {
	Kind        EventKind
	Time        time.Time
	Object      any
	Utilization *events.Utilization
	// Fleet is the fleet a Utilization event is about.
	Fleet events.FleetKey
}

// Observe turns an object the simulator holds into its event. gone is true when the object was
// deleted.
func Observe(obj any, gone bool, now time.Time) (Event, error) {
	if kinds.Of(obj) == "" {
		return Event{}, fmt.Errorf("observe: no event for object of type %T", obj)
	}
	ev := Event{Kind: Observed, Time: now, Object: obj}
	if gone {
		ev.Kind = Gone
	}
	return ev, nil
}

// Passed is the event that only moves time on.
func Passed(now time.Time) Event { return Event{Kind: TimePassed, Time: now} }

// Store folds events into the latest known state of every object: the in-memory twin of the
// operator's informer caches, one indexer per kind with the same indexes (events.Indexers),
// which events.Gather reads as it reads the informers'. Events may arrive duplicated, reordered
// or stale: an event older than what the store holds or last deleted under that name (by
// resourceVersion) is dropped, so folding is idempotent and order-insensitive for any one name.
type Store struct {
	now     time.Time
	objects map[kinds.Kind]*index
	// seen is the newest resourceVersion folded per kind and cache key, deletions included: the
	// tombstone that keeps a late event from bringing back a deleted or replaced object.
	seen   map[string]string
	util   map[events.FleetKey]*events.Utilization
	synced bool
}

var _ events.Caches = (*Store)(nil)

// NewStore returns an empty store. Its caches count as synced once MarkSynced is called.
func NewStore() *Store {
	return &Store{objects: map[kinds.Kind]*index{}, seen: map[string]string{}, util: map[events.FleetKey]*events.Utilization{}}
}

// MarkSynced records that the store holds every object (the informer caches synced).
func (s *Store) MarkSynced() { s.synced = true }

// Now is the time of the latest event folded.
func (s *Store) Now() time.Time { return s.now }

// Cache is the store's cache of a kind, empty when it holds none. The simulator keeps no
// events.ServiceAccounts: their cache is nil, as the operator's is without a metadata client, and the
// simulator tells a missing one itself.
func (s *Store) Cache(kind kinds.Kind) events.Index {
	if kind == events.ServiceAccounts {
		return nil
	}
	return s.cache(kind)
}

// Synced reports whether MarkSynced was called: the store syncs every kind at once.
func (s *Store) Synced(kinds.Kind) bool { return s.synced }

func (s *Store) cache(kind kinds.Kind) *index {
	c := s.objects[kind]
	if c == nil {
		c = &index{funcs: events.Indexers(kind), objects: map[string]metav1.Object{}}
		s.objects[kind] = c
	}
	return c
}

// index is the store's cache of one kind, keyed as the informers' are. A lookup by index scans
// the kind's objects: the simulator's worlds are small, and a scan has no bookkeeping to get
// wrong.
type index struct {
	funcs   map[string]events.IndexFunc
	objects map[string]metav1.Object
}

// cacheKey is an object's key in a cache: namespace/name, the name alone for a cluster-wide one.
func cacheKey(o metav1.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

func (x *index) GetByKey(key string) (any, bool, error) {
	o, ok := x.objects[key]
	return o, ok, nil
}

func (x *index) ByIndex(name, value string) ([]any, error) {
	f, ok := x.funcs[name]
	if !ok {
		return nil, fmt.Errorf("no index %q", name)
	}
	var out []any
	for _, o := range x.objects {
		values, err := f(o)
		if err != nil {
			return nil, fmt.Errorf("index %q of %s: %w", name, cacheKey(o), err)
		}
		if slices.Contains(values, value) {
			out = append(out, o)
		}
	}
	return out, nil
}

// Apply folds one event into the store.
func (s *Store) Apply(ev Event) {
	if ev.Time.After(s.now) {
		s.now = ev.Time
	}
	switch ev.Kind {
	case TimePassed:
		return
	case UtilizationObserved:
		s.util[ev.Fleet] = ev.Utilization
		return
	}
	o, ok := ev.Object.(metav1.Object)
	if !ok {
		return
	}
	kind := kinds.Of(ev.Object)
	c := s.cache(kind)
	key := cacheKey(o)
	rv := o.GetResourceVersion()
	gone := ev.Kind == Gone
	seen := string(kind) + "/" + key
	if last, ok := s.seen[seen]; ok && (newer(last, rv) || (last == rv && !gone)) {
		return // stale, or a repeat of what the store already folded
	}
	s.seen[seen] = rv
	if gone {
		if old, had := c.objects[key]; had && old.GetUID() != o.GetUID() {
			return // a newer object of the same name replaced it already
		}
		delete(c.objects, key)
		return
	}
	c.objects[key] = o
}

// newer reports whether resource version a is strictly newer than b. Versions are compared as
// decimal numbers across objects, which the simulator and etcd both produce; clients must not
// rely on that, but an in-memory twin may.
func newer(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

// Fleets lists the keys of the fleets the store holds, sorted by namespace/name.
func (s *Store) Fleets() []events.FleetKey {
	objs := s.cache(kinds.Fleet).objects
	keys := make([]events.FleetKey, 0, len(objs))
	for _, f := range objs {
		keys = append(keys, events.KeyOf(f))
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// Observe gathers what the store holds about one fleet, as the operator gathers it from its
// informer caches: by the same events.Gather.
func (s *Store) Observe(key events.FleetKey) *events.Observation {
	o, err := events.Gather(s, key, s.now, s.util[key])
	if err != nil {
		// The store's indexers answer every lookup; an error is a broken invariant.
		panic(fmt.Sprintf("gather %s from the store: %v", key, err))
	}
	return o
}
