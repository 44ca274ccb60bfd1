package capacity

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/reservation"
)

// drawHistory draws a history as the policy could have written it: requests, steps and growths
// over the last hour, oldest first.
func drawHistory(t *rapid.T) []v1alpha1.CapacityDecision {
	n := rapid.IntRange(0, 40).Draw(t, "entries")
	var h []v1alpha1.CapacityDecision
	at := t0.Add(-time.Hour)
	for i := 0; i < n; i++ {
		at = at.Add(time.Duration(rapid.IntRange(0, 300).Draw(t, "gap")) * time.Second)
		kind := rapid.SampledFrom([]v1alpha1.DecisionKind{v1alpha1.DecisionScaleInRequested, v1alpha1.DecisionShrinkOne, v1alpha1.DecisionGrow, v1alpha1.DecisionScaleInWithdrawn}).Draw(t, "kind")
		from := int32(rapid.IntRange(1, 9).Draw(t, "from"))
		to := int32(rapid.IntRange(1, 9).Draw(t, "to"))
		h = reservation.Append(h, v1alpha1.CapacityDecision{Time: metav1Time(at), Kind: kind, From: from, To: to, Source: v1alpha1.SourceManual})
	}
	return h
}

// anchorTime is when the standing request to scale in to target started, by a reading of the
// history written here: the newest entry that is not a step taken, if it is a request that asked
// for no more than target removes.
func anchorTime(h []v1alpha1.CapacityDecision, target int32) (time.Time, bool) {
	for i := len(h) - 1; i >= 0; i-- {
		switch d := h[i]; d.Kind {
		case v1alpha1.DecisionShrinkOne:
		case v1alpha1.DecisionScaleInRequested:
			return d.Time.Time, d.To <= target
		default:
			return time.Time{}, false
		}
	}
	return time.Time{}, false
}

// TestStepPolicyProperties: over any history and any facts, growth goes to the target in one
// step; a scale-in takes one member, only when settled, only once a standing request to scale
// in to no fewer members is a full window old; and a cleared history never shrinks earlier.
func TestStepPolicyProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := drawHistory(t)
		f := Facts{
			Current: int32(rapid.IntRange(0, 9).Draw(t, "current")),
			Target:  manual(int32(rapid.IntRange(1, 9).Draw(t, "target"))),
			Settled: rapid.Bool().Draw(t, "settled"),
			Now:     t0.Add(time.Duration(rapid.IntRange(0, 600).Draw(t, "now")) * time.Second),
			Window:  time.Duration(rapid.IntRange(0, 600).Draw(t, "window")) * time.Second,
			History: h,
		}
		p := Step(f)
		switch {
		case f.Target.Members > f.Current:
			if p.Next != f.Target.Members {
				t.Fatalf("growth %d -> %d goes to %d", f.Current, f.Target.Members, p.Next)
			}
		case f.Target.Members == f.Current:
			if p.Next != f.Current {
				t.Fatalf("at target %d, next %d", f.Current, p.Next)
			}
		default:
			if p.Next != f.Current && p.Next != f.Current-1 {
				t.Fatalf("scale-in %d -> %d takes more than one member: next %d", f.Current, f.Target.Members, p.Next)
			}
			if p.Next == f.Current-1 {
				at, ok := anchorTime(h, f.Target.Members)
				if !f.Settled {
					t.Fatalf("scale-in while the previous change has not settled")
				}
				if !ok && f.Window > 0 {
					t.Fatalf("scale-in with no standing request in the history: %v", h)
				}
				if at.After(f.Now) {
					// A request recorded ahead of this clock stands from now.
					at = f.Now
				}
				if ok && f.Now.Before(at.Add(f.Window)) {
					t.Fatalf("scale-in at %s inside the window of the request of %s (window %s)", f.Now, at, f.Window)
				}
			}
		}
		cleared := f
		cleared.History = nil
		if c := Step(cleared); c.Next < p.Next {
			t.Fatalf("with the history cleared the policy goes to %d, with it to %d", c.Next, p.Next)
		}
	})
}

// TestTrimmingKeepsTheStandingRequest: however long the history grows, trimming it to
// reservation.MaxHistory keeps the standing request's anchor where it was.
func TestTrimmingKeepsTheStandingRequest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		req := v1alpha1.CapacityDecision{Time: metav1Time(t0), Kind: v1alpha1.DecisionScaleInRequested, From: 60, To: 1, Source: v1alpha1.SourceManual}
		h := reservation.Append(drawHistory(t), req)
		steps := rapid.IntRange(1, 2*reservation.MaxHistory).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			h = reservation.Append(h, v1alpha1.CapacityDecision{Time: metav1Time(t0.Add(time.Duration(i+1) * time.Second)), Kind: v1alpha1.DecisionShrinkOne,
				From: int32(60 - i), To: int32(59 - i), Source: v1alpha1.SourceManual})
			if len(h) > reservation.MaxHistory {
				t.Fatalf("history of %d entries, bound %d", len(h), reservation.MaxHistory)
			}
			a, ok := ScaleInAnchor(h, 1)
			if !ok || !a.Time.Equal(&req.Time) {
				t.Fatalf("after %d steps the anchor is %v (ok=%t), want the request of %s", i+1, a, ok, req.Time)
			}
		}
	})
}

// TestTargetsStayInBounds: whatever is observed, Manual and Recommend size the fleet at
// spec.members, and Auto within [minMembers, maxMembers].
func TestTargetsStayInBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lo := int32(rapid.IntRange(1, 5).Draw(t, "min"))
		hi := lo + int32(rapid.IntRange(0, 5).Draw(t, "span"))
		mode := rapid.SampledFrom([]v1alpha1.CapacityMode{v1alpha1.CapacityManual, v1alpha1.CapacityRecommend, v1alpha1.CapacityAuto}).Draw(t, "mode")
		spec := &v1alpha1.CelldFleetSpec{Members: int32(rapid.IntRange(int(lo), int(hi)).Draw(t, "members")),
			Capacity: v1alpha1.CapacitySpec{Mode: mode, MinMembers: &lo, MaxMembers: &hi, TargetUtilization: int32(rapid.IntRange(1, 100).Draw(t, "target"))}}
		u := &events.Utilization{Percent: int32(rapid.IntRange(0, 500).Draw(t, "percent")), Members: int32(rapid.IntRange(1, 10).Draw(t, "sampled"))}
		got := TargetFor(spec, u, int32(rapid.IntRange(1, 10).Draw(t, "current")))
		if mode != v1alpha1.CapacityAuto && (got.Members != spec.Members || got.Source != v1alpha1.SourceManual) {
			t.Fatalf("%s mode targets %d (%s), want spec.members %d", mode, got.Members, got.Source, spec.Members)
		}
		if got.Members < lo || got.Members > hi {
			t.Fatalf("%s mode targets %d outside [%d, %d]", mode, got.Members, lo, hi)
		}
		if r := got.Recommended; r != nil && (*r < lo || *r > hi) {
			t.Fatalf("recommendation %d outside [%d, %d]", *r, lo, hi)
		}
	})
}

// TestScaleInOnlyAfterARequestStoodThroughout: whatever the targets do over time (a flapping
// recommendation or autoscaler, manual requests, ticks with nothing observed), a member is
// removed only if every target asked for in the window before it was below the size the fleet
// had then. A target that went back to the size withdrew the request, and the window starts
// again with the next one.
func TestScaleInOnlyAfterARequestStoodThroughout(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const window = time.Minute
		type tick struct {
			at              time.Time
			target, current int32
			kept            bool
		}
		var (
			h       []v1alpha1.CapacityDecision
			seen    []tick
			current = int32(6)
			now     = t0
		)
		n := rapid.IntRange(1, 60).Draw(t, "ticks")
		for i := 0; i < n; i++ {
			now = now.Add(time.Duration(rapid.IntRange(1, 30).Draw(t, "gap")) * time.Second)
			target := Target{Members: int32(rapid.IntRange(1, 9).Draw(t, "target")), Source: v1alpha1.SourceRecommendation}
			if rapid.IntRange(0, 5).Draw(t, "observed") == 0 {
				// Nothing observed: the size is kept, not asked for.
				target = Target{Members: current, Source: v1alpha1.SourceManual, Kept: true}
			}
			seen = append(seen, tick{at: now, target: target.Members, current: current, kept: target.Kept})
			p := Step(Facts{Current: current, Target: target, Settled: true, Now: now, Window: window, History: h})
			h = reservation.AppendAll(h, p.Records)
			if p.Next < current {
				for _, s := range seen {
					if !s.kept && !s.at.Before(now.Add(-window)) && s.target >= s.current {
						t.Fatalf("a member removed at %s (%d -> %d), though at %s the target was %d with %d members: the request did not stand for %s; history %+v",
							now.Format(time.TimeOnly), current, p.Next, s.at.Format(time.TimeOnly), s.target, s.current, window, h)
					}
				}
			}
			current = p.Next
		}
	})
}
