// Package proptest drives the lifecycle machine through the in-memory cluster the way the
// operator drives it through Kubernetes, and checks the safety contract (SPEC section 5) after
// every step: rapid model-based tests, golden scenario scripts and `celld-operator simulate` all
// run on it.
package proptest

import (
	"fmt"
	"strings"

	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
)

// Operator is the operator's loop with the simulator as its driver: an event store in place of
// informer caches, one machine per fleet, and actions applied in order, stopping at the first
// failure, as drivers/kube applies them.
type Operator struct {
	store    *events.Store
	machines map[string]*machine.Fleet
	// Trace receives one line per decision that did something; nil discards.
	Trace func(line string)
}

// NewOperator starts an operator whose caches are synced with the cluster.
func NewOperator(c *sim.Cluster) *Operator {
	o := &Operator{}
	o.Restart(c)
	return o
}

// Restart drops everything the operator holds in memory, as a process restart or a leader
// change does, and lists the cluster again.
func (o *Operator) Restart(c *sim.Cluster) {
	o.store = events.NewStore()
	o.machines = map[string]*machine.Fleet{}
	for _, ev := range c.Resync() {
		o.store.Apply(ev)
	}
	o.store.MarkSynced()
}

// Feed folds observed events into the operator's caches.
func (o *Operator) Feed(evs []events.Event) {
	for _, ev := range evs {
		o.store.Apply(ev)
	}
}

// View is what the operator's caches say of one fleet.
func (o *Operator) View(key string) events.View {
	ns, name, _ := strings.Cut(key, "/")
	return events.Normalize(ns, name, o.store.Observe(ns, name))
}

// Fleets lists the fleets the operator's caches hold.
func (o *Operator) Fleets() []string { return o.store.Fleets() }

// Sync steps every fleet once and applies its actions. It returns the decisions made.
func (o *Operator) Sync(c *sim.Cluster) []machine.Decision {
	var out []machine.Decision
	for _, key := range o.store.Fleets() {
		v := o.View(key)
		m := o.machines[key]
		if m == nil {
			m = machine.New()
			o.machines[key] = m
		}
		d := m.Step(&v)
		out = append(out, d)
		var failed error
		applied := 0
		for _, a := range d.Actions {
			if err := c.Do(a); err != nil {
				failed = fmt.Errorf("%s: %w", a.Key, err)
				break
			}
			applied++
		}
		o.trace(c, key, d, applied, failed)
	}
	return out
}

func (o *Operator) trace(c *sim.Cluster, key string, d machine.Decision, applied int, failed error) {
	if o.Trace == nil {
		return
	}
	var acts []string
	for _, a := range d.Actions[:applied] {
		if a.Kind != machine.Requeue {
			acts = append(acts, "    "+a.String())
		}
	}
	if len(acts) == 0 && failed == nil && d.From == d.To {
		return
	}
	o.Trace(fmt.Sprintf("%s %s %s -> %s", c.Now().Format("15:04:05"), key, d.From, d.To))
	for _, l := range acts {
		o.Trace(l)
	}
	if failed != nil {
		o.Trace("    failed: " + failed.Error())
	}
}
