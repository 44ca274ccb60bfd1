// Package capacity is the capacity policy: one function turns manual requests and
// recommendations into a target, one step policy turns a target into the next size, and the
// capacity history (kept in the fleet's CelldReservation, bounded by package reservation) drives scale-in stabilization across
// operator restarts. It is pure.
package capacity

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// Defaults the API server fills in; repeated here so an object that skipped defaulting (the
// simulator, an old object) gets the same policy.
const (
	DefaultStabilization     = 5 * time.Minute
	DefaultTargetUtilization = 70
	minMembers               = 1
	maxMembers               = 1000
)

// Target is what the fleet's size should be, and who asked for it.
type Target struct {
	Members int32
	Source  v1alpha1.DecisionSource
	// Recommended is the recommendation, nil when the mode computes none or nothing was observed.
	Recommended *int32
	// Kept: nothing was observed, and Members is the size the fleet has, kept rather than asked
	// for. It withdraws no scale-in request: a metrics API that blinks, or an operator that has
	// not sampled yet since its start, neither skips nor restarts a window.
	Kept bool
}

// TargetFor is the one function through which manual requests and recommendations pass.
func TargetFor(spec *v1alpha1.CelldFleetSpec, util *events.Utilization, current int32) Target {
	t := Target{Members: spec.Members, Source: v1alpha1.SourceManual}
	if spec.Capacity.Mode != v1alpha1.CapacityRecommend && spec.Capacity.Mode != v1alpha1.CapacityAuto {
		return t
	}
	rec, ok := recommend(&spec.Capacity, util, current)
	if !ok {
		// Nothing observed decides nothing: an Auto fleet that runs keeps its size, so a metrics
		// API that goes away or answers nothing never scales it in (nor leaves a request to).
		if spec.Capacity.Mode == v1alpha1.CapacityAuto && current > 0 {
			t.Members, t.Kept = current, true
		}
		return t
	}
	t.Recommended = &rec
	if spec.Capacity.Mode == v1alpha1.CapacityAuto {
		t.Members, t.Source = rec, v1alpha1.SourceRecommendation
	}
	return t
}

// recommend sizes the fleet so its mean utilization lands on the target, bounded by min and max.
func recommend(c *v1alpha1.CapacitySpec, u *events.Utilization, current int32) (int32, bool) {
	if u == nil || u.Unavailable || u.Members <= 0 || current <= 0 {
		return 0, false
	}
	target := c.TargetUtilization
	if target <= 0 {
		target = DefaultTargetUtilization
	}
	used := int64(u.Percent) * int64(u.Members)
	n := int32((used + int64(target) - 1) / int64(target))
	lo, hi := int32(minMembers), int32(maxMembers)
	if c.MinMembers != nil {
		lo = *c.MinMembers
	}
	if c.MaxMembers != nil {
		hi = *c.MaxMembers
	}
	return min(max(n, lo), hi), true
}

// Facts is what the step policy needs to know.
type Facts struct {
	// Current is the workload's replicas, 0 when there is no workload yet.
	Current int32
	Target  Target
	// Settled is true when the previous change rolled out and every member is ready.
	Settled bool
	// Maintenance, when set, says which member's node is cordoned: a drain may evict that
	// member at any moment, and a scale-in that takes another member away then would leave two
	// away. No write can be made atomic with an eviction, so no member is removed until the node
	// is uncordoned.
	Maintenance string
	Now         time.Time
	// Window is the scale-in stabilization window.
	Window  time.Duration
	History []v1alpha1.CapacityDecision
}

// metav1Time is how a decision's time is stored: whole seconds, as the API server keeps it.
func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t.UTC().Truncate(time.Second)) }

// Plan is the step policy's answer.
type Plan struct {
	// Next is the size to apply now.
	Next int32
	// Records are the decisions to append to the history, oldest first.
	Records []v1alpha1.CapacityDecision
	// Wait is how long until a held scale-in may proceed (0 when none is held).
	Wait time.Duration
	// Blocked says what holds a scale-in back, empty when nothing does.
	Blocked string
}

// Step is the one step policy: grow to the target in one step; shrink by one member, only once
// the previous change rolled out and every member is ready, no member's node is cordoned, and
// the request to scale in has stood for the stabilization window as the history records it.
func Step(f Facts) Plan {
	p := Plan{Next: f.Current}
	switch {
	case f.Target.Members > f.Current:
		p.Next = f.Target.Members
		// A Grow is read only as the end of the scale-in requests before it. A fleet that starts
		// from no member (its first apply, or its workload created again after someone deleted
		// it) removes none and ends none: its record would decide nothing and cost a write.
		if f.Current > 0 {
			p.Records = append(p.Records, decision(f, v1alpha1.DecisionGrow, f.Current, f.Target.Members))
		}
		return p
	case f.Target.Members == f.Current:
		// Asked for the size it has before a standing request was carried out: the request is
		// withdrawn, and a later one must stand for a window of its own, so a target that flaps
		// (a recommendation, an autoscaler) never removes a member on the strength of a request
		// that did not stand throughout. A request carried out to its end withdraws nothing.
		if d, _ := ScaleInAnchor(f.History, f.Current); !f.Target.Kept && d.Kind == v1alpha1.DecisionScaleInRequested && d.To < f.Current {
			p.Records = append(p.Records, decision(f, v1alpha1.DecisionScaleInWithdrawn, f.Current, f.Current))
		}
		return p
	}
	anchor, anchored := ScaleInAnchor(f.History, f.Target.Members)
	if !anchored {
		anchor = decision(f, v1alpha1.DecisionScaleInRequested, f.Current, f.Target.Members)
		// The request is recorded to start its window, or with the step it allows. Without a
		// window, a request the previous change holds back has nothing to time: it is recorded
		// with its first step, in that step's one write, rather than in a write of its own.
		if f.Window > 0 || (f.Settled && f.Maintenance == "") {
			p.Records = append(p.Records, anchor)
		}
	}
	if anchor.Time.After(f.Now) {
		// Recorded ahead of this clock (another replica's clock, a restored backup): the request
		// stands from now, so its window is neither shortened nor held for as long as the skew.
		anchor.Time = metav1Time(f.Now)
	}
	if ready := anchor.Time.Add(f.Window); f.Now.Before(ready) {
		p.Wait = ready.Sub(f.Now)
		p.Blocked = fmt.Sprintf("scale-in stabilization until %s", ready.UTC().Format(time.RFC3339))
		return p
	}
	if !f.Settled {
		p.Blocked = "the previous change to roll out and every member to be ready before removing a member"
		return p
	}
	if f.Maintenance != "" {
		p.Blocked = f.Maintenance
		return p
	}
	p.Next = f.Current - 1
	p.Records = append(p.Records, decision(f, v1alpha1.DecisionShrinkOne, f.Current, f.Current-1))
	return p
}

func decision(f Facts, kind v1alpha1.DecisionKind, from, to int32) v1alpha1.CapacityDecision {
	return v1alpha1.CapacityDecision{Time: metav1Time(f.Now), Kind: kind, From: from, To: to, Source: f.Target.Source}
}

// ScaleInAnchor finds the standing request a scale-in to target may proceed under: skipping the
// ShrinkOne steps already taken, the newest entry must be a ScaleInRequested for at most as many
// members as target asks to remove. A request for fewer members than the anchor asked for needs a
// window of its own, and a Grow or a withdrawal ends every earlier request.
func ScaleInAnchor(history []v1alpha1.CapacityDecision, target int32) (v1alpha1.CapacityDecision, bool) {
	for i := len(history) - 1; i >= 0; i-- {
		d := history[i]
		switch d.Kind {
		case v1alpha1.DecisionShrinkOne:
			continue
		case v1alpha1.DecisionScaleInRequested:
			return d, target >= d.To
		default:
			return v1alpha1.CapacityDecision{}, false
		}
	}
	return v1alpha1.CapacityDecision{}, false
}
