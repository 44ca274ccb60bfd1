package machine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// autoAt is a settled Auto fleet of n members (minMembers 2, 50% target, 2m window) whose
// spec.members asks for 2: any scale-in would have somewhere to go.
func autoAt(t *testing.T, n int32) *run {
	r := newRun(t, v1alpha1.ProfileBucket, n, map[string]int{})
	r.settle()
	lo := int32(2)
	c := &r.w.fleet.Spec.Capacity
	c.Mode, c.MinMembers, c.TargetUtilization = v1alpha1.CapacityAuto, &lo, 50
	r.w.fleet.Spec.Members = 2
	r.w.fleet.Generation++
	return r
}

// decide steps a fresh machine on what the world shows with usage u, applies what it decided,
// and returns the decision and its CapacityObserved condition.
func (r *run) decide(u *events.Utilization) (Decision, metav1.Condition) {
	r.t.Helper()
	o := r.w.observe()
	o.Utilization = u
	v := events.Normalize(worldNS, worldName, o)
	d := New().Step(&v)
	for _, a := range d.Actions {
		if err := r.w.apply(a); err != nil {
			r.t.Fatalf("apply %s: %v", a, err)
		}
	}
	for _, c := range d.Status.Conditions {
		if c.Type == ConditionCapacityObserved {
			return d, c
		}
	}
	r.t.Fatalf("no %s condition: %+v", ConditionCapacityObserved, d.Status.Conditions)
	return d, metav1.Condition{}
}

func TestCapacityConditionSaysWhatHoldsAScaleIn(t *testing.T) {
	r := autoAt(t, 4)
	low := &events.Utilization{Time: r.w.now, Percent: 10, Members: 4}
	d, c := r.decide(low)
	if c.Status != metav1.ConditionTrue || c.Reason != ReasonScaleInStabilization || !strings.Contains(c.Message, "2 members recommended") {
		t.Fatalf("a scale-in within its window: got %s %s: %s", c.Status, c.Reason, c.Message)
	}
	// The fleet's blockedBy says the same.
	if _, waits, _ := strings.Cut(c.Message, "the scale-in waits for "); waits == "" || !strings.Contains(d.Status.BlockedBy, waits) {
		t.Errorf("a scale-in within its window: blockedBy %q, want it to say %q", d.Status.BlockedBy, waits)
	}

	// Past the window, a member not ready holds it.
	r.w.now = r.w.now.Add(3 * time.Minute)
	p := r.w.members()[0]
	setPodReady(p, false, r.w.now)
	if _, c = r.decide(low); c.Reason != ReasonScaleInNotReady {
		t.Fatalf("a scale-in past its window, a member not ready: got %s %s: %s", c.Status, c.Reason, c.Message)
	}

	// At minMembers, usage that asks for fewer is held there.
	r = autoAt(t, 2)
	if _, c = r.decide(&events.Utilization{Time: r.w.now, Percent: 10, Members: 2}); c.Reason != ReasonMinMembers {
		t.Fatalf("usage below minMembers: got %s %s: %s", c.Status, c.Reason, c.Message)
	}
	if _, c = r.decide(&events.Utilization{Time: r.w.now, Percent: 50, Members: 2}); c.Reason != ReasonObserved {
		t.Fatalf("usage on target: got %s %s: %s", c.Status, c.Reason, c.Message)
	}
}

// TestNothingObservedDecidesNothing: an Auto fleet above spec.members whose usage is not observed
// (none yet, or a metrics API gone, down or empty) keeps its size and records no request, and its
// CapacityObserved condition says why.
func TestNothingObservedDecidesNothing(t *testing.T) {
	for _, u := range []*events.Utilization{nil, {Unavailable: true}, {Unavailable: true, Why: "the metrics API (metrics.k8s.io) does not answer"}} {
		r := autoAt(t, 4)
		if u != nil {
			u.Time = r.w.now
		}
		d, c := r.decide(u)
		for _, a := range d.Actions {
			if a.Kind != PublishStatus && a.Kind != RecordEvent && a.Kind != Requeue {
				t.Errorf("usage %+v: decided %s", u, a)
			}
		}
		if c.Status != metav1.ConditionFalse || c.Reason != ReasonMetricsUnavailable || (u != nil && u.Why != "" && !strings.Contains(c.Message, u.Why)) {
			t.Errorf("usage %+v: CapacityObserved %s %s: %s", u, c.Status, c.Reason, c.Message)
		}
		if d.Status.Members.Desired != 4 {
			t.Errorf("usage %+v: desired %d, want the size the fleet has, 4", u, d.Status.Members.Desired)
		}
	}
}

// TestHistoryKeepsWhatThePolicyReads: a growth ends the scale-in requests before it and is
// recorded; a fleet's first apply, and its workload created again after someone deleted it,
// start from no member, end no request and record nothing. A request standing across the
// re-creation stands after it.
func TestHistoryKeepsWhatThePolicyReads(t *testing.T) {
	r := newRun(t, v1alpha1.ProfilePersistentFleet, 3, map[string]int{})
	r.settle()
	if h := r.w.res.Status.CapacityHistory; len(h) != 0 {
		t.Fatalf("a new fleet's creation recorded in its history: %+v", h)
	}
	r.w.fleet.Spec.Members, r.w.fleet.Generation = 6, r.w.fleet.Generation+1
	r.settle()
	h := r.w.res.Status.CapacityHistory
	if len(h) != 1 || h[0].Kind != v1alpha1.DecisionGrow || h[0].From != 3 || h[0].To != 6 {
		t.Fatalf("a growth 3 -> 6: want one Grow 3->6 in the history, got %+v", h)
	}
	r.w.fleet.Spec.Members, r.w.fleet.Generation = 4, r.w.fleet.Generation+1
	r.w.tick()
	r.pass(r.w.observe())
	h = r.w.res.Status.CapacityHistory
	if n := len(h); n != 2 || h[1].Kind != v1alpha1.DecisionScaleInRequested {
		t.Fatalf("a scale-in asked for within its window: want its request recorded after the Grow, got %+v", h)
	}
	// Someone deletes the StatefulSet; its members go with it, their disks stay.
	r.w.sts = nil
	for name := range r.w.pods {
		delete(r.w.pods, name)
	}
	r.w.say("the StatefulSet is deleted, its Pods with it")
	r.settle()
	if got := r.w.res.Status.CapacityHistory; len(got) != 2 || got[1].Kind != v1alpha1.DecisionScaleInRequested {
		t.Errorf("the workload created again: want the history as it was (the request standing), got %+v", got)
	}
}

// TestAWithdrawnScaleInIsRecorded: a scale-in asked for and then withdrawn (spec.members back to
// the size within the window) is ended in the reservation's history, once; asked for again, it
// starts a window of its own instead of going on under the first request.
func TestAWithdrawnScaleInIsRecorded(t *testing.T) {
	r := newRun(t, v1alpha1.ProfilePersistentFleet, 6, map[string]int{})
	r.settle()
	ask := func(n int32) {
		r.w.fleet.Spec.Members, r.w.fleet.Generation = n, r.w.fleet.Generation+1
		r.w.tick()
		r.w.now = r.w.now.Add(10 * time.Second)
		r.pass(r.w.observe())
	}
	last := func() v1alpha1.CapacityDecision {
		h := r.w.res.Status.CapacityHistory
		if len(h) == 0 {
			t.Fatalf("no history")
		}
		return h[len(h)-1]
	}
	ask(3)
	first := last()
	if first.Kind != v1alpha1.DecisionScaleInRequested {
		t.Fatalf("a scale-in asked for: want its request recorded, got %+v", first)
	}
	ask(6)
	if w := last(); w.Kind != v1alpha1.DecisionScaleInWithdrawn || w.From != 6 || w.To != 6 {
		t.Fatalf("spec.members back to 6 within the window: want the request withdrawn, got %+v", w)
	}
	r.settle()
	n := len(r.w.res.Status.CapacityHistory)
	r.w.now = r.w.now.Add(2 * time.Minute)
	ask(3)
	again := last()
	if again.Kind != v1alpha1.DecisionScaleInRequested || !again.Time.After(first.Time.Time) || len(r.w.res.Status.CapacityHistory) != n+1 {
		t.Errorf("asked again after the withdrawal and past the first request's window: want a new request, got %+v", r.w.res.Status.CapacityHistory)
	}
	if got := *r.w.sts.Spec.Replicas; got != 6 {
		t.Errorf("a member removed at once under a withdrawn request: replicas %d, want 6 until the new request's window ends", got)
	}
}

// A scale-in within its window and a member within its grace period: the fleet is stepped again
// when the sooner of the two ends.
func TestRequeueIsTheSoonerOfWindowAndGrace(t *testing.T) {
	r := autoAt(t, 4)
	low := &events.Utilization{Time: r.w.now, Percent: 10, Members: 4}
	d, c := r.decide(low)
	window := requeueAfter(d)
	if c.Reason != ReasonScaleInStabilization || window <= worldGrace/2 {
		t.Fatalf("a scale-in within its window: %s %s, requeue after %s; want a window longer than %s", c.Reason, c.Message, window, worldGrace/2)
	}
	setPodReady(r.w.members()[0], false, r.w.now.Add(-worldGrace/2))
	if d, _ = r.decide(low); requeueAfter(d) != worldGrace/2 {
		t.Errorf("window %s left, a member's grace %s left: requeue after %s, want %s", window, worldGrace/2, requeueAfter(d), worldGrace/2)
	}
}

// Each step of a scale-in past its window is recorded in the history with the write that takes
// it: ShrinkOne from the current size to one less.
func TestScaleInStepsAreRecorded(t *testing.T) {
	r := autoAt(t, 4)
	low := &events.Utilization{Time: r.w.now, Percent: 10, Members: 4}
	r.decide(low)
	r.w.now = r.w.now.Add(3 * time.Minute)
	low.Time = r.w.now
	d, _ := r.decide(low)
	var shrinks []string
	for _, a := range d.Actions {
		if a.Kind != AppendHistory {
			continue
		}
		for _, rec := range a.Decisions {
			if rec.Kind == v1alpha1.DecisionShrinkOne {
				shrinks = append(shrinks, fmt.Sprintf("%d->%d", rec.From, rec.To))
			}
		}
	}
	if len(shrinks) != 1 || shrinks[0] != "4->3" {
		t.Errorf("a scale-in step past its window: ShrinkOne records %v, want [4->3] (actions %s)", shrinks, d.Actions)
	}
}

// A step the fleet does not take is not recorded: past the window, a fleet held by a name someone
// else owns keeps its size and its history.
func TestAHeldScaleInStepIsNotRecorded(t *testing.T) {
	r := autoAt(t, 4)
	low := &events.Utilization{Time: r.w.now, Percent: 10, Members: 4}
	r.decide(low)
	r.w.now = r.w.now.Add(3 * time.Minute)
	o := r.w.observe()
	o.Utilization = &events.Utilization{Time: r.w.now, Percent: 10, Members: 4}
	o.Unowned = []string{"Service/" + worldName + "-peers"}
	v := events.Normalize(worldNS, worldName, o)
	d := New().Step(&v)
	for _, a := range d.Actions {
		if a.Kind == AppendHistory || a.Kind == Apply {
			t.Errorf("held by a taken name: want no step and no record, got %s", a)
		}
	}
}
