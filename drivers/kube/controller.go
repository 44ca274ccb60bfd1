package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
	celldlisters "github.com/celld/celld-operator/api/generated/listers/celld/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/loop"
	"github.com/celld/celld-operator/machine"
)

// Defaults of Options.
const (
	// DefaultWorkers: a sync spends its time waiting on round trips to the API server, not on
	// CPU. With 16, 50 fleets scaling in at once waited up to 6.9 s in the queue behind each
	// other's status and history writes (a step's p99 1.74 s); with 64, 0.9 s (p99 0.83 s). Since
	// status writes have writers of their own and answers are synced first (answerFirst), the
	// tail at 500 fleets is the API server's round trips, and every worker more is one request
	// more in flight under the wave of spec changes: 500 fleets scaling in at once stepped at
	// p99 3.24 s with 64 and 2.24 s with 32 (fresh reads of the slowest step 1.75 s and 0.55 s),
	// while a spec change waited a little longer for its first write (p99 12.29 s and 14.40 s).
	// Whose requests the API server answers first is still its priority and fairness' choice.
	DefaultWorkers          = 32
	DefaultResync           = 10 * time.Minute
	DefaultCapacityInterval = 30 * time.Second
	// syncTimeout bounds one sync's requests, including the one a shutdown lets finish.
	syncTimeout = time.Minute
	queueName   = "celldfleet"
)

// Clients are the API clients the controller uses. Metadata and Metrics may be nil: without
// them missing ServiceAccounts and member usage go unobserved. Status may be nil: the status
// writes then go through Celld.
type Clients struct {
	// Kube and Celld move fleets: the caches, the applies, the deletes, the finalizers, the
	// reservations' creation and the premises' fresh reads. NewClients gives both one limiter.
	Kube  kubernetes.Interface
	Celld versioned.Interface
	// Status writes the fleets' status and the reservations' capacity history only, on a
	// limiter of its own, so that it never queues ahead of a write that moves a fleet.
	Status    versioned.Interface
	Metadata  metadata.Interface
	Metrics   metricsclient.Interface
	Discovery discovery.DiscoveryInterface
	Recorder  record.EventRecorder
}

// Options configure the controller.
type Options struct {
	// Namespaces limit the fleets to these namespaces; empty is every namespace.
	Namespaces []string
	Workers    int
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
	queue   workqueue.TypedRateLimitingInterface[events.FleetKey]
	order   *answerFirst
	metrics *Metrics
	util    *utilizations
	sampler *sampler

	loop *loop.Loop
	// statuses writes the fleets' status apart from the syncs that decide it.
	statuses *loop.StatusWriter

	mu sync.Mutex
	// eventAt is when an informer event first enqueued a key not yet synced, for the
	// event-to-action latency; syncing holds it while that key's sync runs.
	eventAt, syncing map[events.FleetKey]time.Time
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
	inf := NewInformers(c.Kube, c.Celld, c.Metadata, opts.Namespaces)
	order := newAnswerFirst()
	ctl := &Controller{
		opts: opts,
		log:  opts.Log,
		inf:  inf,
		// The Applier appends to a reservation's history on the cached reservation: no read first.
		ap: &Applier{Kube: c.Kube, Celld: c.Celld, Status: c.Status, Recorder: c.Recorder,
			Reservations: celldlisters.NewCelldReservationLister(inf.Reservations.GetIndexer()), nodes: newNodeReads()},
		meta:    c.Metadata,
		metrics: opts.Metrics,
		util:    newUtilizations(),
		order:   order,
		queue:   newQueue(order, opts.Metrics.queueProvider),
		eventAt: map[events.FleetKey]time.Time{},
		syncing: map[events.FleetKey]time.Time{},
	}
	ctl.ap.Healed = func(reason string) { ctl.metrics.heals.WithLabelValues(reason).Inc() }
	opts.Metrics.leader.watch(opts.Leadership)
	ctl.statuses = loop.NewStatusWriter(ctl.ap.writeStatus, func(key events.FleetKey) string {
		f, err := inf.fleetLister.CelldFleets(key.Namespace).Get(key.Name)
		if err != nil {
			return ""
		}
		return f.ResourceVersion
	})
	ctl.statuses.Written = func(lag time.Duration) { opts.Metrics.statusLag.Observe(lag.Seconds()) }
	ctl.statuses.Failed = func(key events.FleetKey, err error) {
		ns, name := key.Namespace, key.Name
		opts.Metrics.actions.WithLabelValues(string(machine.PublishStatus), "error").Inc()
		ctl.log.Error().Err(err).Str("namespace", ns).Str("fleet", name).Str("action", string(machine.PublishStatus)).
			Msg("status write failed; requeued")
		ctl.queue.AddRateLimited(key)
	}
	ctl.statuses.Moved = func(key events.FleetKey) { ctl.queue.Add(key) }
	ctl.loop = loop.New(ctl.statuses.Wrap(driver{c: ctl, applierSender: applierSender{ctl.ap}}), opts.Log, ctl.hooks())
	ctl.sampler = &sampler{metrics: c.Metrics, discovery: c.Discovery, inf: ctl.inf, util: ctl.util,
		enqueue: ctl.queue.Add, log: opts.Log, counts: opts.Metrics.utilizationGet, gauges: opts.Metrics.capacity}
	ctl.inf.OnUndecodable(ctl.undecodable)
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

// enqueueEvent is what the informers' handlers call; an answer goes ahead (answerFirst).
func (c *Controller) enqueueEvent(key events.FleetKey, answer bool) {
	if answer {
		c.order.mark(key)
	}
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
	c.log.Info().Int("workers", c.opts.Workers).Strs("watchNamespaces", c.opts.Namespaces).Msg("waiting for caches to sync")
	if !c.inf.WaitForCacheSync(ctx) {
		// The wait ends false only when ctx ended: a stop asked for before the caches synced (or
		// before the poll saw them synced, though ready already said so) is a clean stop.
		c.log.Info().Msg("stopped before the caches synced: nothing was synced")
		return nil
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
	var writers sync.WaitGroup
	writers.Go(func() { c.statuses.Run(statusWorkers(c.opts.Workers), c.bindWrite(ctx)) })
	<-ctx.Done()
	c.log.Info().Msg("shutting down: finishing the syncs in flight")
	c.queue.ShutDown()
	wg.Wait()
	// The statuses the last syncs handed over are written before the writers stop.
	c.statuses.Stop()
	writers.Wait()
	c.log.Info().Msg("workers stopped")
	return nil
}

// statusWorkers is how many status writes may be in flight at once: a quarter of the syncs, so
// that under load the status writes coalesce (a fleet's latest replaces the one that waits)
// rather than take as many of the API server's seats as the writes that move fleets.
func statusWorkers(workers int) int { return max(2, workers/4) }

// bindWrite gives a write made apart from a sync the deadline and the lease binding a sync has;
// false once this replica no longer leads.
func (c *Controller) bindWrite(ctx context.Context) func() (context.Context, context.CancelFunc, bool) {
	return func() (context.Context, context.CancelFunc, bool) {
		if !c.opts.Leadership.Leading() {
			return ctx, func() {}, false
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), syncTimeout)
		wctx, unbind := c.opts.Leadership.Bound(wctx)
		return wctx, func() { unbind(); cancel() }, true
	}
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
				c.queue.Add(events.KeyOf(f))
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
// stopping at the first error: the one loop (package loop), with the API server as its driver.
func (c *Controller) Sync(ctx context.Context, key events.FleetKey) error {
	trace := &loop.Trace{}
	c.mu.Lock()
	if at, ok := c.eventAt[key]; ok {
		c.syncing[key] = at
		trace.Event = at
	}
	delete(c.eventAt, key)
	c.mu.Unlock()
	ctx = loop.WithTrace(ctx, trace)
	defer func() {
		c.mu.Lock()
		delete(c.syncing, key)
		c.mu.Unlock()
	}()
	_, err := c.loop.Sync(ctx, key, time.Now())
	result := "ok"
	if err != nil {
		result = "error"
	}
	c.metrics.syncs.WithLabelValues(result).Inc()
	return err
}

// hooks count and time what the loop does.
func (c *Controller) hooks() loop.Hooks {
	return loop.Hooks{
		Decided: func(key events.FleetKey, d machine.Decision, took time.Duration) {
			c.metrics.decision.Observe(took.Seconds())
			c.metrics.states.set(key, d.To)
			c.metrics.fleets.set(key, d.Status)
			c.metrics.capacity.decided(key, &d.Status)
			for _, t := range d.Transitions {
				c.metrics.transitions.WithLabelValues(string(t.From), string(t.To)).Inc()
			}
			for _, u := range d.Unhandled {
				c.metrics.unhandled.WithLabelValues(string(u.From), string(u.Trigger)).Inc()
				ns, name := key.Namespace, key.Name
				c.log.Error().Str("namespace", ns).Str("fleet", name).Str("in", string(u.From)).Str("trigger", string(u.Trigger)).
					Msg("the lifecycle table has no row for this trigger; the fleet stays where it is")
			}
		},
		Acted: func(key events.FleetKey, a machine.Action, err error) {
			if err != nil {
				c.metrics.actions.WithLabelValues(string(a.Kind), "error").Inc()
				return
			}
			c.metrics.actions.WithLabelValues(string(a.Kind), "ok").Inc()
			// The first action a sync sends after an informer event ends that event's latency.
			c.mu.Lock()
			at, ok := c.syncing[key]
			delete(c.syncing, key)
			c.mu.Unlock()
			if ok {
				c.metrics.eventToAction.Observe(time.Since(at).Seconds())
			}
		},
		Requeue: func(key events.FleetKey, after time.Duration) { c.queue.AddAfter(key, after) },
		Forgot: func(key events.FleetKey) {
			c.metrics.states.set(key, "")
			c.metrics.fleets.drop(key)
			c.metrics.capacity.forget(key)
			c.util.drop(key)
		},
	}
}

// driver is the loop's driver over the informer caches and the API server.
type driver struct {
	c *Controller
	applierSender
}

func (d driver) Observe(ctx context.Context, key events.FleetKey, now time.Time) (*events.Observation, error) {
	obs, err := d.c.inf.Observe(key, now, d.c.util.get(key))
	if err != nil || obs.Fleet == nil || obs.Fleet.DeletionTimestamp == nil {
		return obs, err
	}
	if obs.Uninstalling, err = uninstalling(ctx, d.c.meta); err != nil {
		return nil, fmt.Errorf("the fleet is being deleted; whether with its CRD is unknown, so nothing is done yet: %w", err)
	}
	if obs.Uninstalling {
		d.c.log.Warn().Str("namespace", key.Namespace).Str("fleet", key.Name).Msg("the fleet goes with its CustomResourceDefinition (an uninstall): its disks are kept")
	}
	return obs, nil
}
