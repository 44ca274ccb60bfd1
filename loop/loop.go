// Package loop is the operator's one reconcile loop: it turns a fleet's key into a decision and
// applies the decision's actions in order, stopping at the first failure. drivers/kube runs it
// against the API server and proptest runs it against the simulator, so the property tests
// exercise the loop that ships. It does no I/O of its own: a Driver observes and acts.
package loop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// Driver is what the loop needs of a cluster.
type Driver interface {
	// Observe gathers what the driver's caches hold about one fleet at now. A fleet that does not
	// exist observes with a nil Fleet.
	Observe(ctx context.Context, key events.FleetKey, now time.Time) (*events.Observation, error)
	Sender
}

// Sender is the part of a Driver that acts: what Send needs.
type Sender interface {
	// Fresh reads, bypassing every cache, what an action's premise names.
	Fresh(ctx context.Context, t *Target, a machine.Action) (machine.Fresh, error)
	// Do sends one action's request. It may replace t.Fleet with the server's answer to a write
	// of the fleet, so a later action of the same sync carries the current resourceVersion.
	Do(ctx context.Context, t *Target, a machine.Action) error
}

// Overlayer is a Driver that writes a fleet's status apart from the sync that asked for it. It
// shows the fleet as that write will leave it, so the machine sees the status it asked for as
// written and does not ask for it again while the write is on its way.
type Overlayer interface {
	// Overlay is f with what the driver has yet to write, or has written and the caches do not
	// show yet: they show cachedRV; f itself when nothing is. The view's fingerprint hashes the
	// status it shows, so no number names it.
	Overlay(key events.FleetKey, f *v1alpha1.CelldFleet, cachedRV string) *v1alpha1.CelldFleet
}

// Forgetter is a Driver that holds something of each fleet: the loop tells it of a fleet that
// is gone.
type Forgetter interface {
	Forget(key events.FleetKey)
}

// Target is the fleet a sync's actions are about.
type Target struct {
	Fleet *v1alpha1.CelldFleet
	// Current is what the driver's fresh read for the premise of the action CurrentKey found of
	// the object it writes (nil: absent), so sending it needs no second read. The driver's own.
	Current    any
	CurrentKey string
	// Answers are the server's answers to the sync's Applies, in order: the objects as written.
	Answers []kinds.Object
	// Decided is when the machine decided the actions (the clock's time right after the step,
	// not the observation's Now): a driver may confirm a premise on a read another sync sent, but
	// only on one sent after this. Zero when no sync decided (an action sent on its own).
	Decided time.Time
}

// Hooks let a driver count and time what the loop does. Every field may be nil.
type Hooks struct {
	// Decided is called once the machine decided, before any action.
	Decided func(key events.FleetKey, d machine.Decision, took time.Duration)
	// Acted is called after every action sent, err nil when it succeeded.
	Acted func(key events.FleetKey, a machine.Action, err error)
	// Requeue asks for the key to be synced again after the given delay.
	Requeue func(key events.FleetKey, after time.Duration)
	// Forgot is called when the fleet no longer exists and the loop dropped its memory of it.
	Forgot func(key events.FleetKey)
	// Path is told of each path of the loop's answers taken, by the names AnswerPaths lists:
	// the property tests count them and fail when one was never taken.
	Path func(name string)
}

// Loop holds one machine per fleet and the API server's latest refusal of each.
type Loop struct {
	driver Driver
	log    zerolog.Logger
	hooks  Hooks

	mu       sync.Mutex
	machines map[events.FleetKey]*fleetMachine
}

type fleetMachine struct {
	uid types.UID
	m   *machine.Fleet
	// refused is the API server's latest refusal of an object rendered from the fleet's spec.
	refused *events.Refusal
	// refusedUntil ends a refusal that may pass on its own (Forbidden: a namespace being
	// deleted, a permission or policy not yet in place); zero holds it until the spec changes.
	refusedUntil time.Time
	// answers are the API server's answers to the loop's own latest writes of the fleet and its
	// workload, while the caches have not shown them.
	answers answers
}

// ForbiddenRetry is how long a Forbidden refusal holds the fleet, Degraded, before the refused
// write is tried again.
var ForbiddenRetry = time.Minute

// New returns a loop with no memory: a process start or a leader change.
func New(d Driver, log zerolog.Logger, hooks Hooks) *Loop {
	return &Loop{driver: d, log: log, hooks: hooks, machines: map[events.FleetKey]*fleetMachine{}}
}

// Result is what one sync did.
type Result struct {
	Decision machine.Decision
	// Applied counts the actions that succeeded, requeues included, before the first failure.
	Applied int
	// Exists is false when the fleet is gone.
	Exists bool
}

// Sync observes one fleet at now, steps its machine and applies the decision's actions in order,
// stopping at the first error, which it returns.
func (l *Loop) Sync(ctx context.Context, key events.FleetKey, now time.Time) (Result, error) {
	start := time.Now()
	if !key.Valid() {
		l.log.Error().Str("key", key.String()).Msg("dropping a malformed key")
		return Result{}, nil
	}
	ns, name := key.Namespace, key.Name
	obs, err := l.driver.Observe(ctx, key, now)
	if err != nil {
		l.log.Error().Err(err).Str("namespace", ns).Str("fleet", name).Msg("observe")
		return Result{}, err
	}
	// The machine first: a fleet recreated under the same name starts with no memory, not even
	// of the refusal its predecessor's spec earned.
	m := l.machineFor(key, obs.Fleet)
	obs.Refused = l.refusal(key, now)
	cached := versionsOf(obs)
	if obs.Fleet != nil {
		// A sync that follows the operator's own writes before their watch events arrive would
		// otherwise decide on the objects before them.
		l.overlayAnswers(key, obs, cached, now)
		if o, ok := l.driver.(Overlayer); ok {
			obs.Fleet = o.Overlay(key, obs.Fleet, cached.fleet)
		}
	}
	view := events.Normalize(ns, name, obs)
	d := m.Step(&view)
	// The clock's own time, with its monotonic reading: a driver compares it with when its reads
	// were sent, which a wall clock stepped back would get wrong.
	decided := time.Now()
	res := Result{Decision: d, Exists: obs.Fleet != nil}
	if l.hooks.Decided != nil {
		l.hooks.Decided(key, d, time.Since(start))
	}
	if obs.Fleet == nil {
		l.forget(key)
		return res, nil
	}

	log := l.log.With().Str("namespace", ns).Str("fleet", name).Str("state", string(d.To)).Logger()
	for _, t := range d.Transitions {
		log.Info().Str("from", string(t.From)).Str("to", string(t.To)).Str("trigger", string(t.Trigger)).Msg("state changed")
	}
	target := &Target{Fleet: obs.Fleet, Decided: decided}
	times := syncTimes{trace: TraceFrom(ctx), start: start, decided: decided}
	defer func() {
		// The acknowledgment point: the machine learns which of its actions were made.
		m.Advance(d.Actions[:res.Applied], view.Now)
		l.answered(key, obs.Fleet, target, cached, now)
	}()
	for _, a := range d.Actions {
		alog := log.With().Str("action", string(a.Kind)).Str("key", a.Key).Logger()
		if a.Kind == machine.Requeue {
			if l.hooks.Requeue != nil {
				l.hooks.Requeue(key, a.After)
			}
			alog.Debug().Dur("after", a.After).Msg("requeue")
			res.Applied++
			continue
		}
		sent := time.Now()
		err := l.do(ctx, target, a)
		took := time.Since(sent)
		if l.hooks.Acted != nil {
			l.hooks.Acted(key, a, err)
		}
		if err != nil {
			// A namespace being deleted refuses every create: its fleets go with it, and nothing
			// is wrong with their specs.
			terminating := apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
			// Only a write's answer shows that the API server refuses an object rendered from the
			// spec, so it goes back into the next observation.
			if (a.Kind == machine.Apply || a.Kind == machine.BindReservation) && !terminating {
				r := &events.Refusal{Generation: obs.Fleet.Generation, Object: a.Ref.String(), Message: refusalMessage(err)}
				switch {
				case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
					l.refuse(key, r, time.Time{})
				case apierrors.IsForbidden(err):
					// It may pass on its own: Degraded now, and another try later rather than a
					// silent backoff loop.
					l.refuse(key, r, now.Add(ForbiddenRetry))
					if l.hooks.Requeue != nil {
						l.hooks.Requeue(key, ForbiddenRetry)
					}
				}
			}
			ev := alog.Error()
			if errors.Is(err, machine.ErrPremiseChanged) || apierrors.IsConflict(err) || terminating {
				// A cache behind the API server: the next sync sees the newer object. Or the
				// namespace is going, and the fleet with it.
				ev = alog.Info()
			}
			times.fields(ev, sent, took)
			ev.Err(err).Dur("took", took).Msg("action failed; requeued")
			return res, err
		}
		res.Applied++
		ev := alog.Info()
		times.fields(ev, sent, took)
		ev.Dur("took", took).Msg(a.String())
	}
	log.Debug().Dur("took", time.Since(start)).Int("actions", len(d.Actions)).Msg("synced")
	return res, nil
}

// do confirms an action's premise on fresh reads, then sends it: a cache that missed a change
// never costs a member or a step.
func (l *Loop) do(ctx context.Context, t *Target, a machine.Action) error {
	return Send(ctx, l.driver, t, a)
}

// Send confirms an action's premise on the sender's fresh reads, then sends it. A request that
// carries its read's preconditions (a disk's delete carries the claim's resourceVersion) and
// meets a Conflict found a write made since that read, by someone else: the premise is
// confirmed once more, on new reads, and the request sent once more: a retry on the next sync
// would cost a requeue and a whole sync's reads for the same answer.
func Send(ctx context.Context, s Sender, t *Target, a machine.Action) error {
	err := confirmAndSend(ctx, s, t, a)
	if a.Premise != nil && apierrors.IsConflict(err) {
		err = confirmAndSend(ctx, s, t, a)
	}
	return err
}

func confirmAndSend(ctx context.Context, s Sender, t *Target, a machine.Action) error {
	if a.Premise != nil {
		fresh, err := s.Fresh(ctx, t, a)
		if err != nil {
			return fmt.Errorf("confirm %s: %w", a.Key, err)
		}
		if err := a.Premise.Check(fresh); err != nil {
			return fmt.Errorf("confirm %s: %w", a.Key, err)
		}
	}
	return s.Do(ctx, t, a)
}

// machineFor is the machine of the fleet at key, a fresh one when the fleet was recreated under
// the same name: what the old machine remembers is about another fleet.
func (l *Loop) machineFor(key events.FleetKey, f *v1alpha1.CelldFleet) *machine.Fleet {
	l.mu.Lock()
	defer l.mu.Unlock()
	fm := l.machines[key]
	if f == nil {
		if fm != nil {
			return fm.m
		}
		return machine.New()
	}
	if fm == nil || fm.uid != f.UID {
		fm = &fleetMachine{uid: f.UID, m: machine.New()}
		l.machines[key] = fm
	}
	return fm.m
}

func (l *Loop) refusal(key events.FleetKey, now time.Time) *events.Refusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fm := l.machines[key]; fm != nil {
		if !fm.refusedUntil.IsZero() && now.After(fm.refusedUntil) {
			fm.refused, fm.refusedUntil = nil, time.Time{}
		}
		return fm.refused
	}
	return nil
}

func (l *Loop) refuse(key events.FleetKey, r *events.Refusal, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fm := l.machines[key]; fm != nil {
		fm.refused, fm.refusedUntil = r, until
	}
}

// overlayAnswers puts into obs the loop's answers about the fleet that still stand.
func (l *Loop) overlayAnswers(key events.FleetKey, obs *events.Observation, cached cachedVersions, now time.Time) {
	l.mu.Lock()
	var path string
	if fm := l.machines[key]; fm != nil {
		path = fm.answers.overlay(obs, cached, now)
	}
	l.mu.Unlock()
	if path != "" && l.hooks.Path != nil {
		l.hooks.Path(path)
	}
}

// answered keeps the API server's answers to a sync's writes, made by a sync that observed the
// caches at cached.
func (l *Loop) answered(key events.FleetKey, observed *v1alpha1.CelldFleet, t *Target, cached cachedVersions, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fm := l.machines[key]; fm != nil && observed != nil && observed.UID == fm.uid {
		fm.answers.record(observed, t.Fleet, t.Answers, cached, now)
	}
}

// forget drops what the loop keeps about a fleet that no longer exists.
func (l *Loop) forget(key events.FleetKey) {
	l.mu.Lock()
	delete(l.machines, key)
	l.mu.Unlock()
	if f, ok := l.driver.(Forgetter); ok {
		f.Forget(key)
	}
	if l.hooks.Forgot != nil {
		l.hooks.Forgot(key)
	}
}

// refusalMessage is the API server's own words for a refusal, without the request's wrapping.
func refusalMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

// Remembered counts the fleets whose machine the loop holds.
func (l *Loop) Remembered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.machines)
}
