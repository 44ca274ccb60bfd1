package machine

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/capacity"
	"github.com/celld/celld-operator/events"
)

// The CapacityObserved condition's reasons: whether usage was observed, and what holds back the
// scale-in it asks for, if one waits.
const (
	// ReasonObserved: usage was observed and nothing holds back what it recommends.
	ReasonObserved = "Observed"
	// ReasonScaleInStabilization: the scale-in waits for spec.capacity.scaleInStabilization,
	// measured on the reservation's history.
	ReasonScaleInStabilization = "ScaleInStabilization"
	// ReasonScaleInNotReady: the scale-in waits for the previous change to roll out and every
	// member to be ready.
	ReasonScaleInNotReady = "ScaleInWaitsForReady"
	// ReasonScaleInMaintenance: the scale-in waits for a member's node to be uncordoned.
	ReasonScaleInMaintenance = "ScaleInWaitsForMaintenance"
	// ReasonMinMembers: usage asks for fewer members than spec.capacity.minMembers allows.
	ReasonMinMembers = "MinMembers"
)

// capacityCondition says, for a fleet whose capacity mode reads usage, what was observed, what
// it recommends, and why a scale-in waits. Nil for a Manual fleet.
func (p *planner) capacityCondition(cond func(string, bool, string, string) metav1.Condition) *metav1.Condition {
	v, fx := p.v, p.fx
	f := v.Fleet
	mode := f.Spec.Capacity.Mode
	if mode != v1alpha1.CapacityRecommend && mode != v1alpha1.CapacityAuto {
		return nil
	}
	keeps := "the fleet stays at spec.members"
	if mode == v1alpha1.CapacityAuto {
		keeps = "the fleet keeps its size"
	}
	u := v.Utilization
	switch {
	case u == nil:
		c := cond(ConditionCapacityObserved, false, ReasonMetricsUnavailable, "no usage observed yet: "+keeps)
		return &c
	case u.Unavailable:
		c := cond(ConditionCapacityObserved, false, ReasonMetricsUnavailable,
			orText(u.Why, "the cluster serves no metrics API (metrics.k8s.io)")+": no decision is made, "+keeps)
		return &c
	case fx.target.Recommended == nil:
		c := cond(ConditionCapacityObserved, false, ReasonPending, "no workload to size yet")
		return &c
	}
	target := f.Spec.Capacity.TargetUtilization
	if target <= 0 {
		target = capacity.DefaultTargetUtilization
	}
	rec := *fx.target.Recommended
	msg := fmt.Sprintf("members use %d%% of their CPU requests (target %d%%, %d members sampled): %d members recommended",
		u.Percent, target, u.Members, rec)
	reason := ReasonObserved
	switch {
	case fx.target.Members < fx.current && fx.plan.Blocked != "" && fx.plan.Wait > 0:
		reason, msg = ReasonScaleInStabilization, msg+"; the scale-in waits for "+fx.plan.Blocked
	case fx.target.Members < fx.current && fx.plan.Blocked != "" && fx.plan.Blocked == fx.maintenance:
		reason, msg = ReasonScaleInMaintenance, msg+"; the scale-in waits for "+fx.plan.Blocked
	case fx.target.Members < fx.current && fx.plan.Blocked != "":
		reason, msg = ReasonScaleInNotReady, msg+"; the scale-in waits for "+fx.plan.Blocked
	case f.Spec.Capacity.MinMembers != nil && rec == *f.Spec.Capacity.MinMembers && unbounded(f, v.Utilization, fx.current) < rec:
		reason, msg = ReasonMinMembers, msg+"; usage asks for fewer, spec.capacity.minMembers keeps "+fmt.Sprint(rec)
	}
	c := cond(ConditionCapacityObserved, true, reason, msg)
	return &c
}

// unbounded is the recommendation without the minMembers floor, from the one function that
// recommends.
func unbounded(f *v1alpha1.CelldFleet, u *events.Utilization, current int32) int32 {
	spec := f.Spec
	one := int32(1)
	spec.Capacity.MinMembers = &one
	if t := capacity.TargetFor(&spec, u, current); t.Recommended != nil {
		return *t.Recommended
	}
	return 0
}
