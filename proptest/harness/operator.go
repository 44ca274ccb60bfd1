// Package harness is the property tests' world: it drives the operator's loop (package loop, the
// one drivers/kube runs) through the in-memory cluster, plays a person's actions and faults
// (Ops, scripts), and checks the safety contract (SPEC section 5) after every step. The rapid
// model-based tests and golden scenario scripts of package proptest, and `celld-sim`, run on it.
package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"

	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/loop"
	"github.com/celld/celld-operator/machine"
)

// Operator is the production loop with the simulator as its driver: an event store in place of
// informer caches, the cluster's truth for the premises' fresh reads, and the cluster's request
// handling for the actions. Statuses go through the operator's own status writer, written when
// the world says (WriteStatuses), so a sync may observe its fleet with a status on its way.
type Operator struct {
	c        *sim.Cluster
	store    *sim.Store
	loop     *loop.Loop
	statuses *loop.StatusWriter
	// paths counts the paths of the status writers and the loops told of, over restarts.
	paths map[string]int
	// held are status writes sent whose answers have not come back, each with the round it comes
	// back after.
	held []heldAnswer
	// Trace receives one line per decision that did something; nil discards.
	Trace func(line string)
	// PremiseRefusals counts the actions the loop refused because a fresh read contradicted the
	// decision's premise: proof that lagging caches are caught, not merely harmless.
	PremiseRefusals int
	// Failures counts the actions the cluster refused (conflicts, refusals).
	Failures int
	// last is the observation of the sync in progress.
	last *events.Observation
}

// NewOperator starts an operator whose caches are synced with the cluster.
func NewOperator(c *sim.Cluster) *Operator {
	o := &Operator{c: c}
	o.Restart(c)
	return o
}

// Restart drops everything the operator holds in memory, as a process restart or a leader
// change does, and lists the cluster again.
func (o *Operator) Restart(c *sim.Cluster) {
	o.c = c
	o.store = sim.NewStore()
	if o.paths == nil {
		o.paths = map[string]int{}
	}
	o.held = nil // sent, and their answers lost with the process
	o.statuses = loop.NewStatusWriter(o.sendStatus, o.cachedRV)
	o.statuses.Failed = func(events.FleetKey, error) { o.Failures++ }
	o.statuses.Path = o.took
	o.loop = loop.New(o.statuses.Wrap(simDriver{o}), zerolog.Nop(), loop.Hooks{Acted: o.acted, Path: o.took})
	for _, ev := range c.Resync() {
		o.store.Apply(ev)
	}
	o.store.MarkSynced()
}

func (o *Operator) acted(_ events.FleetKey, _ machine.Action, err error) {
	switch {
	case err == nil:
	case errors.Is(err, machine.ErrPremiseChanged):
		o.PremiseRefusals++
	default:
		o.Failures++
	}
}

// sendStatus writes a status as the API server does: the answer is the fleet as stored, nil when
// it is gone.
func (o *Operator) sendStatus(_ context.Context, key events.FleetKey, uid types.UID, st *v1alpha1.CelldFleetStatus) (*v1alpha1.CelldFleet, error) {
	a := machine.Action{Kind: machine.PublishStatus, Key: "status/" + key.String(),
		Ref: kinds.Ref{Kind: kinds.Fleet, Namespace: key.Namespace, Name: key.Name}, UID: uid, Status: st}
	if err := o.c.Do(a); err != nil {
		return nil, err
	}
	if f := o.c.Fleet(key.Namespace, key.Name); f != nil && f.UID == uid {
		return f, nil
	}
	return nil, nil
}

// cachedRV is the resourceVersion the operator's cache shows of a fleet.
func (o *Operator) cachedRV(key events.FleetKey) string {
	if f := o.store.Observe(key).Fleet; f != nil {
		return f.ResourceVersion
	}
	return ""
}

// WriteStatuses writes n of the statuses waiting, the most urgent first; n < 0 writes them all.
func (o *Operator) WriteStatuses(n int) {
	for ; n != 0 && o.statuses.WriteNext(context.Background()); n-- {
	}
}

// heldAnswer is a status write in flight: sent, its answer on its way.
type heldAnswer struct {
	answer func()
	until  int
}

// HoldStatuses sends n of the statuses waiting, the most urgent first, and holds their answers
// until round until: the writes are in flight meanwhile, one per fleet at most.
func (o *Operator) HoldStatuses(n, until int) {
	for ; n > 0; n-- {
		answer, ok := o.statuses.SendNext(context.Background())
		if !ok {
			return
		}
		o.held = append(o.held, heldAnswer{answer: answer, until: until})
	}
}

// AnswerStatuses lets the answers held until round or before come back (all of them with round
// < 0), oldest first.
func (o *Operator) AnswerStatuses(round int) {
	var keep []heldAnswer
	for _, h := range o.held {
		if round >= 0 && h.until > round {
			keep = append(keep, h)
			continue
		}
		h.answer()
	}
	o.held = keep
}

// StatusesWaiting counts the fleets whose status waits to be written.
func (o *Operator) StatusesWaiting() int { return o.statuses.Waiting() }

// Paths counts the status writers' and the loops' paths taken, over restarts.
func (o *Operator) Paths() map[string]int { return maps.Clone(o.paths) }

// took counts a path the status writer or the loop told of. The simulated operator runs on one
// goroutine: its status writer sends only when the world says (WriteStatuses).
func (o *Operator) took(path string) { o.paths[path]++ }

// Feed folds observed events into the operator's caches.
func (o *Operator) Feed(evs []sim.Event) {
	for _, ev := range evs {
		o.store.Apply(ev)
	}
}

// View is what the operator's caches say of one fleet.
func (o *Operator) View(key events.FleetKey) events.View {
	return events.Normalize(key.Namespace, key.Name, o.store.Observe(key))
}

// Fleets lists the fleets the operator's caches hold.
func (o *Operator) Fleets() []events.FleetKey { return o.store.Fleets() }

// Pass is one fleet's sync: the observation the loop decided on and what it decided.
type Pass struct {
	Key      events.FleetKey
	Obs      *events.Observation
	Decision machine.Decision
	// Sent are the requests the pass sent, in order: what it did, not only what it decided.
	Sent []sim.Request
	// Handed are the statuses the pass handed to the status writer, as the requests that write
	// them: the writer sends each later (or a newer one that replaced it), apart from the pass.
	Handed []sim.Request
}

// Written is what the pass wrote or handed over to be written: Sent, then Handed.
func (p Pass) Written() []sim.Request {
	if len(p.Handed) == 0 {
		return p.Sent
	}
	return append(append([]sim.Request(nil), p.Sent...), p.Handed...)
}

// Sync runs the loop once for every fleet the caches hold, at the cluster's clock (the
// operator's clock is the wall clock, not its caches'). It returns what each sync decided on.
func (o *Operator) Sync(c *sim.Cluster) []Pass {
	o.c = c
	var out []Pass
	for _, key := range o.store.Fleets() {
		o.last = nil
		from := c.RequestCount()
		res, err := o.loop.Sync(context.Background(), key, c.Now())
		p := Pass{Key: key, Obs: o.last, Decision: res.Decision, Sent: c.RequestsFrom(from)}
		for _, a := range res.Decision.Actions[:res.Applied] {
			if a.Kind == machine.PublishStatus && a.Status != nil {
				p.Handed = append(p.Handed, sim.Request{Time: c.Now(), Action: a.Kind, Key: a.Key, Verb: "update", Resource: "celldfleets/status",
					Namespace: key.Namespace, Name: key.Name, Status: a.Status.DeepCopy()})
			}
		}
		out = append(out, p)
		o.trace(c, key, res, err)
	}
	return out
}

// simDriver is the loop's driver over the operator's event store and the simulated cluster.
type simDriver struct{ o *Operator }

func (d simDriver) Observe(_ context.Context, key events.FleetKey, now time.Time) (*events.Observation, error) {
	obs := d.o.store.Observe(key)
	if now.After(obs.Now) {
		obs.Now = now
	}
	// As drivers/kube does, the CustomResourceDefinition is read fresh, not from a cache. The
	// simulator keeps no ServiceAccount objects, so none reach the store: they are read as they
	// are. PriorityClasses come through the store, as through the operator's cache.
	obs.Uninstalling = d.o.c.Uninstalling()
	obs.ServiceAccountMissing = d.o.c.ServiceAccountMissing(obs.Fleet)
	d.o.last = obs
	return obs, nil
}

func (d simDriver) Fresh(_ context.Context, _ *loop.Target, a machine.Action) (machine.Fresh, error) {
	return d.o.c.Fresh(a), nil
}

// Do answers a write of the fleet itself with the fleet as stored, as the API server does: the
// loop decides its next sync on that answer while the operator's cache lags it.
func (d simDriver) Do(ctx context.Context, t *loop.Target, a machine.Action) error {
	if err := d.o.c.Send(ctx, t, a); err != nil {
		return err
	}
	switch a.Kind {
	case machine.AddFinalizer, machine.RemoveFinalizer:
		if f := d.o.c.Fleet(a.Namespace, a.Name); f != nil && t.Fleet != nil && f.UID == t.Fleet.UID {
			t.Fleet = f
		}
	}
	return nil
}

func (o *Operator) trace(c *sim.Cluster, key events.FleetKey, res loop.Result, failed error) {
	if o.Trace == nil {
		return
	}
	d := res.Decision
	var acts []string
	for _, a := range d.Actions[:res.Applied] {
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
