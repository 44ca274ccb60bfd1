package kube

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
)

// capacityHolds are the reasons a scale-in waits, as the CapacityObserved condition names them.
var capacityHolds = []string{machine.ReasonScaleInStabilization, machine.ReasonScaleInNotReady, machine.ReasonScaleInMaintenance, machine.ReasonMinMembers}

// capacityGauges show the capacity path of each Recommend and Auto fleet: the latest usage read,
// the recommendation the machine made of it, and what holds back a scale-in.
type capacityGauges struct {
	utilization *prometheus.GaugeVec
	observed    *prometheus.GaugeVec
	recommended *prometheus.GaugeVec
	held        *prometheus.GaugeVec
}

func newCapacityGauges(reg prometheus.Registerer) *capacityGauges {
	g := &capacityGauges{
		utilization: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "capacity_utilization_percent",
			Help: "celld's latest observed CPU usage in percent of its CPU request over the members, sidecars left out, by fleet.",
		}, []string{"namespace", "fleet"}),
		observed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "capacity_observed",
			Help: "1 when the latest read of the metrics API observed the fleet's usage, 0 when it did not (no decision is made then).",
		}, []string{"namespace", "fleet"}),
		recommended: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "capacity_recommended_members",
			Help: "The members the fleet's usage recommends (status.recommendedMembers), by fleet.",
		}, []string{"namespace", "fleet"}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "capacity_scale_in_held",
			Help: "1 for the reason a scale-in the fleet's usage asks for waits (ScaleInStabilization, ScaleInWaitsForReady, ScaleInWaitsForMaintenance, MinMembers), 0 for the others.",
		}, []string{"namespace", "fleet", "reason"}),
	}
	reg.MustRegister(g.utilization, g.observed, g.recommended, g.held)
	return g
}

// sampled records a sample of the metrics API.
func (g *capacityGauges) sampled(f *v1alpha1.CelldFleet, u events.Utilization) {
	if g == nil {
		return
	}
	if u.Unavailable {
		g.observed.WithLabelValues(f.Namespace, f.Name).Set(0)
		g.utilization.DeleteLabelValues(f.Namespace, f.Name)
		return
	}
	g.observed.WithLabelValues(f.Namespace, f.Name).Set(1)
	g.utilization.WithLabelValues(f.Namespace, f.Name).Set(float64(u.Percent))
}

// decided records what the machine made of the fleet's usage, from the status it decided.
func (g *capacityGauges) decided(key events.FleetKey, st *v1alpha1.CelldFleetStatus) {
	if g == nil {
		return
	}
	ns, name := key.Namespace, key.Name
	c := meta.FindStatusCondition(st.Conditions, machine.ConditionCapacityObserved)
	if c == nil || st.RecommendedMembers == nil {
		g.recommended.DeleteLabelValues(ns, name)
	} else {
		g.recommended.WithLabelValues(ns, name).Set(float64(*st.RecommendedMembers))
	}
	for _, r := range capacityHolds {
		v := 0.0
		if c != nil && c.Reason == r {
			v = 1
		}
		if c == nil {
			g.held.DeleteLabelValues(ns, name, r)
			continue
		}
		g.held.WithLabelValues(ns, name, r).Set(v)
	}
}

// forget drops a fleet no longer served.
func (g *capacityGauges) forget(key events.FleetKey) {
	if g == nil {
		return
	}
	ns, name := key.Namespace, key.Name
	g.utilization.DeleteLabelValues(ns, name)
	g.observed.DeleteLabelValues(ns, name)
	g.recommended.DeleteLabelValues(ns, name)
	for _, r := range capacityHolds {
		g.held.DeleteLabelValues(ns, name, r)
	}
}
