package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
)

// Defaults of Options.
const (
	DefaultWorkers          = 4
	DefaultResync           = 10 * time.Minute
	DefaultCapacityInterval = 30 * time.Second
	// syncTimeout bounds one sync's requests, including the one a shutdown lets finish.
	syncTimeout = time.Minute
	queueName   = "celldfleet"
)

// Clients are the API clients the controller uses. Metadata and Metrics may be nil: without
// them missing ServiceAccounts and member usage go unobserved.
type Clients struct {
	Kube      kubernetes.Interface
	Celld     versioned.Interface
	Metadata  metadata.Interface
	Metrics   metricsclient.Interface
	Discovery discovery.DiscoveryInterface
	Recorder  record.EventRecorder
}

// Options configure the controller.
type Options struct {
	// Namespace limits the fleets to one namespace; empty is every namespace.
	Namespace string
	Workers   int
	// Resync re-enqueues every fleet this often, so a decision that only time changes is
	// rechecked even if a requeue was lost.
	Resync time.Duration
	// CapacityInterval is how often member usage is sampled for Recommend and Auto fleets.
	CapacityInterval time.Duration
	Log              zerolog.Logger
	Metrics          *Metrics
	// Leadership, with leader election, ends every sync the moment the lease is lost.
	Leadership *Leadership
}

// Controller runs the lifecycle machine of every fleet against the API server.
type Controller struct {
	opts    Options
	log     zerolog.Logger
	inf     *Informers
	ap      *Applier
	meta    metadata.Interface
	queue   workqueue.TypedRateLimitingInterface[string]
	metrics *Metrics
	util    *utilizations
	sampler *sampler

	mu       sync.Mutex
	machines map[string]*fleetMachine
	// eventAt is when an informer event first enqueued a key not yet synced, for the
	// event-to-action latency.
	eventAt map[string]time.Time
}

type fleetMachine struct {
	uid types.UID
	m   *machine.Fleet
	// refused is the API server's latest refusal of an object rendered from the fleet's spec:
	// only a write's answer shows it, so it goes back into the next observation.
	refused *events.Refusal
}

// NewController builds the caches and the queue; nothing runs until Start and Run.
func NewController(c Clients, opts Options) (*Controller, error) {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Resync <= 0 {
		opts.Resync = DefaultResync
	}
	if opts.CapacityInterval <= 0 {
		opts.CapacityInterval = DefaultCapacityInterval
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
	}
	ctl := &Controller{
		opts:    opts,
		log:     opts.Log,
		inf:     NewInformers(c.Kube, c.Celld, c.Metadata, opts.Namespace),
		ap:      &Applier{Kube: c.Kube, Celld: c.Celld, Recorder: c.Recorder},
		meta:    c.Metadata,
		metrics: opts.Metrics,
		util:    newUtilizations(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: queueName, MetricsProvider: opts.Metrics.queueProvider}),
		machines: map[string]*fleetMachine{},
		eventAt:  map[string]time.Time{},
	}
	ctl.sampler = &sampler{metrics: c.Metrics, discovery: c.Discovery, inf: ctl.inf, util: ctl.util,
		enqueue: ctl.queue.Add, log: opts.Log, counts: opts.Metrics.utilizationGet}
	if err := ctl.inf.AddHandlers(ctl.enqueueEvent); err != nil {
		return nil, fmt.Errorf("add event handlers: %w", err)
	}
	return ctl, nil
}

// Start starts the caches. A replica on standby starts them too, so it is ready, and takes over
// with warm caches.
func (c *Controller) Start(stop <-chan struct{}) { c.inf.Start(stop) }

// Synced reports whether every cache synced: the readiness check.
func (c *Controller) Synced() bool { return c.inf.HasSynced() }

// enqueueEvent is what the informers' handlers call.
func (c *Controller) enqueueEvent(key string) {
	c.mu.Lock()
	if _, ok := c.eventAt[key]; !ok {
		c.eventAt[key] = time.Now()
	}
	c.mu.Unlock()
	c.queue.Add(key)
}

// Run works the queue until ctx ends, then stops taking work, lets the syncs in flight finish,
// and returns. The caches must have been started.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.log.Info().Int("workers", c.opts.Workers).Str("watchNamespace", c.opts.Namespace).Msg("waiting for caches to sync")
	if !c.inf.WaitForCacheSync(ctx) {
		return fmt.Errorf("caches did not sync: %w", ctx.Err())
	}
	c.log.Info().Msg("caches synced, starting workers")
	var wg sync.WaitGroup
	for range c.opts.Workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	wg.Go(func() { c.resync(ctx) })
	wg.Go(func() { c.sampler.run(ctx, c.opts.CapacityInterval) })
	<-ctx.Done()
	c.log.Info().Msg("shutting down: finishing the syncs in flight")
	c.queue.ShutDown()
	wg.Wait()
	c.log.Info().Msg("workers stopped")
	return nil
}

// resync re-enqueues every fleet on the resync period.
func (c *Controller) resync(ctx context.Context) {
	t := time.NewTicker(c.opts.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fleets, err := c.inf.fleetLister.List(labels.Everything())
			if err != nil {
				c.log.Error().Err(err).Msg("resync: list fleets")
				continue
			}
			for _, f := range fleets {
				c.queue.Add(f.Namespace + "/" + f.Name)
			}
		}
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if ctx.Err() != nil {
		// Shutting down: take no new work. Whoever holds the lease next syncs every fleet.
		return false
	}
	if c.opts.Leadership != nil && !c.opts.Leadership.Leading() {
		return false
	}
	// The sync in flight finishes even once shutdown began: its requests get their own deadline.
	// Not once the lease is lost: from then on another replica may be writing.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), syncTimeout)
	sctx, unbind := c.opts.Leadership.Bound(sctx)
	err := c.Sync(sctx, key)
	unbind()
	cancel()
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	c.queue.AddRateLimited(key)
	return true
}

// Sync observes one fleet, steps its machine and applies the decision's actions in order,
// stopping at the first error.
func (c *Controller) Sync(ctx context.Context, key string) error {
	start := time.Now()
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		c.log.Error().Err(err).Str("key", key).Msg("dropping a malformed key")
		return nil
	}
	c.mu.Lock()
	eventAt, fromEvent := c.eventAt[key]
	delete(c.eventAt, key)
	c.mu.Unlock()

	obs, err := c.inf.Observe(ns, name, start, c.util.get(key))
	if err != nil {
		c.log.Error().Err(err).Str("namespace", ns).Str("fleet", name).Msg("observe")
		return err
	}
	obs.Refused = c.refusal(key)
	if obs.Fleet != nil && obs.Fleet.DeletionTimestamp != nil {
		if obs.Uninstalling, err = uninstalling(ctx, c.meta); err != nil {
			c.log.Error().Err(err).Str("namespace", ns).Str("fleet", name).Msg("the fleet is being deleted; whether with its CRD is unknown, so nothing is done yet")
			return err
		}
		if obs.Uninstalling {
			c.log.Warn().Str("namespace", ns).Str("fleet", name).Msg("the fleet goes with its CustomResourceDefinition (an uninstall): its disks are kept")
		}
	}
	view := events.Normalize(ns, name, obs)
	fm := c.machineFor(key, obs.Fleet)
	d := fm.Step(&view)
	c.metrics.decision.Observe(time.Since(start).Seconds())
	if obs.Fleet == nil {
		c.forget(key)
		return nil
	}

	log := c.log.With().Str("namespace", ns).Str("fleet", name).Str("state", string(d.To)).Logger()
	c.metrics.states.set(key, d.To)
	for _, t := range d.Transitions {
		c.metrics.transitions.WithLabelValues(string(t.From), string(t.To)).Inc()
		log.Info().Str("from", string(t.From)).Str("to", string(t.To)).Str("trigger", string(t.Trigger)).Msg("state changed")
	}
	for _, u := range d.Unhandled {
		c.metrics.unhandled.WithLabelValues(string(u.From), string(u.Trigger)).Inc()
		log.Error().Str("in", string(u.From)).Str("trigger", string(u.Trigger)).Msg("the lifecycle table has no row for this trigger; the fleet stays where it is")
	}
	target := &Target{Fleet: obs.Fleet}
	acted := false
	for _, a := range d.Actions {
		alog := log.With().Str("action", string(a.Kind)).Str("key", a.Key).Logger()
		if a.Kind == machine.Requeue {
			c.queue.AddAfter(key, a.After)
			alog.Debug().Dur("after", a.After).Msg("requeue")
			continue
		}
		if err := c.ap.Do(ctx, target, a); err != nil {
			c.metrics.actions.WithLabelValues(string(a.Kind), "error").Inc()
			if a.Kind == machine.Apply && (apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) {
				c.refuse(key, &events.Refusal{Generation: obs.Fleet.Generation, Object: refusedObject(a), Message: refusalMessage(err)})
			}
			ev := alog.Error()
			if apierrors.IsConflict(err) || errors.Is(err, machine.ErrPremiseChanged) {
				// A cache behind the API server: the next sync sees the newer object.
				ev = alog.Info()
			}
			ev.Err(err).Msg("action failed; requeued")
			return err
		}
		c.metrics.actions.WithLabelValues(string(a.Kind), "ok").Inc()
		if a.Kind == machine.DeletePod {
			c.metrics.heals.WithLabelValues(a.Reason).Inc()
		}
		if !acted && fromEvent {
			c.metrics.eventToAction.Observe(time.Since(eventAt).Seconds())
		}
		acted = true
		alog.Info().Msg(a.String())
	}
	log.Debug().Dur("took", time.Since(start)).Int("actions", len(d.Actions)).Msg("synced")
	return nil
}

// machineFor is the machine of the fleet at key, a fresh one when the fleet was recreated under
// the same name: what the old machine remembers is about another fleet.
func (c *Controller) machineFor(key string, f *v1alpha1.CelldFleet) *machine.Fleet {
	c.mu.Lock()
	defer c.mu.Unlock()
	fm := c.machines[key]
	if f == nil {
		if fm != nil {
			return fm.m
		}
		return machine.New()
	}
	if fm == nil || fm.uid != f.UID {
		fm = &fleetMachine{uid: f.UID, m: machine.New()}
		c.machines[key] = fm
	}
	return fm.m
}

func (c *Controller) refusal(key string) *events.Refusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fm := c.machines[key]; fm != nil {
		return fm.refused
	}
	return nil
}

func (c *Controller) refuse(key string, r *events.Refusal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fm := c.machines[key]; fm != nil {
		fm.refused = r
	}
}

// refusedObject names the refused object as a person looks it up: Kind/name.
func refusedObject(a machine.Action) string {
	kind, _, _ := strings.Cut(strings.TrimPrefix(a.Key, "apply/"), "/")
	return kind + "/" + a.Name
}

// refusalMessage is the API server's own words for a refusal, without the request's wrapping.
func refusalMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

// forget drops what the controller keeps about a fleet that no longer exists.
func (c *Controller) forget(key string) {
	c.mu.Lock()
	delete(c.machines, key)
	c.mu.Unlock()
	c.metrics.states.set(key, "")
	c.util.drop(key)
}
