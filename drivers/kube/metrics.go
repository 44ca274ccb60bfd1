package kube

import (
	"slices"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/util/workqueue"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

const metricsNamespace = "celld_operator"

// Metrics are the operator's Prometheus metrics, on a registry of their own so that nothing a
// dependency registers globally leaks into what the operator serves.
type Metrics struct {
	Registry *prometheus.Registry

	transitions    *prometheus.CounterVec
	unhandled      *prometheus.CounterVec
	actions        *prometheus.CounterVec
	writes         *prometheus.CounterVec
	writesRefused  *prometheus.CounterVec
	requests       *prometheus.CounterVec
	faults         *prometheus.CounterVec
	heals          *prometheus.CounterVec
	decision       prometheus.Histogram
	eventToAction  prometheus.Histogram
	statusLag      prometheus.Histogram
	states         *stateCollector
	fleets         *fleetCollector
	syncs          *prometheus.CounterVec
	buildInfo      *prometheus.GaugeVec
	leader         *leaderGauge
	queueProvider  workqueue.MetricsProvider
	utilizationGet *prometheus.CounterVec
	undecodable    *prometheus.CounterVec
	described      *describedRegisterer
	capacity       *capacityGauges
}

// NewMetrics registers every metric on a new registry.
func NewMetrics() *Metrics {
	reg := &describedRegisterer{Registry: prometheus.NewRegistry()}
	m := &Metrics{
		Registry:  reg.Registry,
		described: reg,
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "transitions_total",
			Help: "Lifecycle state changes, by the state left and the state entered.",
		}, []string{"from", "to"}),
		unhandled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "unhandled_triggers_total",
			Help: "Triggers the lifecycle table has no row for, by state and trigger: a bug in the table (the fleet stays where it is).",
		}, []string{"state", "trigger"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "actions_total",
			Help: "Actions of the lifecycle machine applied, by kind and result (ok or error).",
		}, []string{"kind", "result"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "api_writes_total",
			Help: "Every write request the operator sent to the API server (events, status and leases included), by verb and resource.",
		}, []string{"verb", "resource"}),
		writesRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "api_writes_refused_total",
			Help: "Writes never sent because this replica did not hold the leader election lease (standing by, or the lease lost), by verb and resource.",
		}, []string{"verb", "resource"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "api_requests_total",
			Help: "Every request the operator sent to the API server, reads (get, list, watch) and writes, client-go's own retries included, by verb, resource and response code (error when no response came).",
		}, []string{"verb", "resource", "code"}),
		faults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "api_faults_injected_total",
			Help: "Requests failed on purpose by --api-fault-rate, by kind of fault.",
		}, []string{"kind"}),
		heals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "heals_total",
			Help: "Members deleted to heal the fleet, by why the member could not come back on its own.",
		}, []string{"reason"}),
		decision: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "decision_duration_seconds",
			Help:    "Time from the start of a sync to the machine's decision (reading the caches, normalizing, stepping).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		eventToAction: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "event_to_action_seconds",
			Help:    "Time from the informer event that enqueued a fleet to the first action applied for it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		statusLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "status_write_lag_seconds",
			Help:    "Time from a sync handing a fleet's status over to the API server's answer to its write (from the oldest status the written one replaced).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		utilizationGet: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "utilization_samples_total",
			Help: "Samples of member usage read from the metrics API, by result (ok, error, unavailable, empty).",
		}, []string{"result"}),
		undecodable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "undecodable_objects_total",
			Help: "celld.io objects read that the operator's types cannot decode, by kind and what was done: status_dropped (served without its status) or skipped (not served until fixed).",
		}, []string{"kind", "handling"}),
		states: newStateCollector(),
		fleets: newFleetCollector(),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "syncs_total",
			Help: "Syncs of one fleet, by result: ok, or error (the fleet is retried with backoff).",
		}, []string{"result"}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "build_info",
			Help: "Always 1: the operator's version, the commit it was built from and the Go version that built it.",
		}, []string{"version", "commit", "go_version"}),
		leader: newLeaderGauge(),
	}
	m.SetBuild("", "")
	m.queueProvider = newQueueMetrics(reg)
	m.capacity = newCapacityGauges(reg)
	reg.MustRegister(m.transitions, m.unhandled, m.actions, m.writes, m.writesRefused, m.requests, m.faults, m.heals, m.decision, m.eventToAction, m.statusLag, m.utilizationGet, m.undecodable, m.states,
		m.fleets, m.syncs, m.buildInfo, m.leader,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// stateCollector reports how many fleets are in each state. It reads the states the workers last
// decided at scrape time, so a fleet that is gone stops counting the moment its key is dropped.
type stateCollector struct {
	desc   *prometheus.Desc
	mu     sync.Mutex
	fleets map[events.FleetKey]v1alpha1.FleetState
}

var allStates = []v1alpha1.FleetState{
	v1alpha1.StateProvisioning, v1alpha1.StateSteady, v1alpha1.StateGrowing,
	v1alpha1.StateShrinkingOne, v1alpha1.StateHealing, v1alpha1.StateDeleting,
}

func newStateCollector() *stateCollector {
	return &stateCollector{
		desc:   prometheus.NewDesc(metricsNamespace+"_fleets", "Fleets by lifecycle state.", []string{"state"}, nil),
		fleets: map[events.FleetKey]v1alpha1.FleetState{},
	}
}

func (c *stateCollector) set(key events.FleetKey, s v1alpha1.FleetState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s == "" {
		delete(c.fleets, key)
		return
	}
	c.fleets[key] = s
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	counts := map[v1alpha1.FleetState]int{}
	for _, s := range c.fleets {
		counts[s]++
	}
	c.mu.Unlock()
	states := append([]v1alpha1.FleetState(nil), allStates...)
	for s := range counts {
		if !slices.Contains(states, s) {
			states = append(states, s)
		}
	}
	sort.Slice(states, func(i, j int) bool { return states[i] < states[j] })
	for _, s := range states {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}
