package kube

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// fleetCollector reports each fleet's last decided status: its state, member counts and
// conditions, labelled by namespace and fleet. It holds the statuses the workers last decided and
// reads them at scrape time, so a fleet that is gone has no series from the moment its key is
// dropped: nothing is left behind for a deleted fleet, and nothing alerts on it.
type fleetCollector struct {
	state, desired, current, ready, condition *prometheus.Desc

	mu     sync.Mutex
	fleets map[events.FleetKey]fleetSample
}

// fleetSample is what the collector keeps of one decision: copies, never the decision's own
// slices.
type fleetSample struct {
	state                   v1alpha1.FleetState
	desired, current, ready int32
	conditions              []metav1.Condition
}

func newFleetCollector() *fleetCollector {
	fleet := []string{"namespace", "fleet"}
	return &fleetCollector{
		state: prometheus.NewDesc(metricsNamespace+"_fleet_state",
			"The fleet's lifecycle state: 1 for the state it is in, 0 for the others.", append(fleet, "state"), nil),
		desired: prometheus.NewDesc(metricsNamespace+"_fleet_desired_members",
			"Members the fleet is decided to have (spec.members, or the decided size in Auto mode; 0 while it is deleted).", fleet, nil),
		current: prometheus.NewDesc(metricsNamespace+"_fleet_current_members",
			"Members the fleet's workload has.", fleet, nil),
		ready: prometheus.NewDesc(metricsNamespace+"_fleet_ready_members",
			"Members that are ready.", fleet, nil),
		condition: prometheus.NewDesc(metricsNamespace+"_fleet_condition",
			"The fleet's conditions, one series each, always 1: status is True, False or Unknown, and reason the condition's reason.",
			append(fleet, "type", "status", "reason"), nil),
		fleets: map[events.FleetKey]fleetSample{},
	}
}

// set keeps the status a decision published for the fleet key.
func (c *fleetCollector) set(key events.FleetKey, st v1alpha1.CelldFleetStatus) {
	if st.State == "" {
		c.drop(key)
		return
	}
	s := fleetSample{state: st.State, desired: st.Members.Desired, current: st.Members.Current, ready: st.Members.Ready,
		conditions: append([]metav1.Condition(nil), st.Conditions...)}
	c.mu.Lock()
	c.fleets[key] = s
	c.mu.Unlock()
}

// drop forgets a fleet that no longer exists.
func (c *fleetCollector) drop(key events.FleetKey) {
	c.mu.Lock()
	delete(c.fleets, key)
	c.mu.Unlock()
}

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.desired, c.current, c.ready, c.condition} {
		ch <- d
	}
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	keys := make([]events.FleetKey, 0, len(c.fleets))
	for k := range c.fleets {
		keys = append(keys, k)
	}
	samples := make(map[events.FleetKey]fleetSample, len(c.fleets))
	for k, s := range c.fleets {
		samples[k] = s
	}
	c.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, k := range keys {
		s := samples[k]
		ns, name := k.Namespace, k.Name
		for _, st := range statesWith(s.state) {
			v := 0.0
			if st == s.state {
				v = 1
			}
			gauge(c.state, v, ns, name, string(st))
		}
		gauge(c.desired, float64(s.desired), ns, name)
		gauge(c.current, float64(s.current), ns, name)
		gauge(c.ready, float64(s.ready), ns, name)
		for _, cond := range s.conditions {
			gauge(c.condition, 1, ns, name, cond.Type, string(cond.Status), cond.Reason)
		}
	}
}

// statesWith is every lifecycle state, and s if it is none of them.
func statesWith(s v1alpha1.FleetState) []v1alpha1.FleetState {
	for _, known := range allStates {
		if known == s {
			return allStates
		}
	}
	return append(append([]v1alpha1.FleetState(nil), allStates...), s)
}
