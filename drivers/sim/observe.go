package sim

import (
	"sort"
	"time"

	"github.com/celld/celld-operator/events"
)

// Drain returns the events queued since the last Drain, oldest first, and empties the queue:
// what the operator's informers would have delivered. The caller may fold them into an
// Store as they are, or duplicate, reorder or drop them to play a flaky watch.
func (c *Cluster) Drain() []Event {
	out := c.queue
	c.queue = nil
	return out
}

// Resync returns what an informer's relist tells: a Gone event for the last object removed under
// each name (a store that saw it go, or holds a newer object of that name, ignores it), then an
// Observed event for every object now stored (a terminating fleet with its deletion timestamp),
// the latest utilization of each fleet and the current time. Folded
// into a store after dropped events, it brings the store to the cluster's state. It does not
// touch the queue.
func (c *Cluster) Resync() []Event {
	var out []Event
	for _, k := range kindOrder {
		for _, kk := range sortedKeys(c.tombstones[k]) {
			ev, err := Observe(copyOf(c.tombstones[k][kk]), true, c.now)
			if err != nil {
				panic("sim: " + err.Error())
			}
			out = append(out, ev)
		}
	}
	for _, k := range kindOrder {
		for _, o := range c.list(k) {
			ev, err := Observe(copyOf(o), false, c.now)
			if err != nil {
				panic("sim: " + err.Error())
			}
			out = append(out, ev)
		}
	}
	keys := make([]events.FleetKey, 0, len(c.util))
	for k := range c.util {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, key := range keys {
		u := *c.util[key]
		out = append(out, Event{Kind: UtilizationObserved, Time: c.now, Fleet: key, Utilization: &u})
	}
	return append(out, Passed(c.now))
}

// Observe returns the current truth about one fleet, gathered exactly as the operator gathers
// it from synced caches (an Store fed a full resync), so the two cannot disagree on what
// belongs to a fleet.
func (c *Cluster) Observe(key events.FleetKey) *events.Observation {
	s := NewStore()
	for _, ev := range c.Resync() {
		s.Apply(ev)
	}
	s.MarkSynced()
	o := s.Observe(key)
	if o != nil {
		o.Uninstalling = c.uninstalling
		o.ServiceAccountMissing = c.ServiceAccountMissing(o.Fleet) // the simulator keeps no ServiceAccount objects
	}
	return o
}

// SetUtilization queues an observation of a fleet's usage, as a metrics poll would deliver.
func (c *Cluster) SetUtilization(namespace, name string, u events.Utilization) {
	if u.Time.IsZero() {
		u.Time = c.now
	}
	k := events.FleetKey{Namespace: namespace, Name: name}
	c.util[k] = &u
	c.samples = append(c.samples, UtilizationSample{Time: u.Time, Namespace: namespace, Name: name,
		Percent: u.Percent, Members: u.Members, Unavailable: u.Unavailable})
	cp := u
	c.queue = append(c.queue, Event{Kind: UtilizationObserved, Time: c.now, Fleet: k, Utilization: &cp})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// UtilizationSample is one utilization observation the cluster delivered, as plain values.
type UtilizationSample struct {
	Time            time.Time
	Namespace, Name string
	Percent         int32
	Members         int32
	Unavailable     bool
}

// UtilizationSamples lists every utilization observation delivered, oldest first.
func (c *Cluster) UtilizationSamples() []UtilizationSample {
	return append([]UtilizationSample(nil), c.samples...)
}
