package capacity

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/reservation"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func manual(n int32) Target { return Target{Members: n, Source: v1alpha1.SourceManual} }

func TestGrowInOneStep(t *testing.T) {
	p := Step(Facts{Current: 3, Target: manual(9), Now: t0, Window: time.Minute})
	if p.Next != 9 || len(p.Records) != 1 || p.Records[0].Kind != v1alpha1.DecisionGrow {
		t.Fatalf("grow 3->9: got next=%d records=%v", p.Next, p.Records)
	}
}

func TestScaleInWaitsForWindowThenOneAtATime(t *testing.T) {
	p := Step(Facts{Current: 6, Target: manual(3), Settled: true, Now: t0, Window: time.Minute})
	if p.Next != 6 || p.Wait != time.Minute || len(p.Records) != 1 || p.Records[0].Kind != v1alpha1.DecisionScaleInRequested {
		t.Fatalf("first sight of scale-in must only record and wait: %+v", p)
	}
	h := p.Records
	p = Step(Facts{Current: 6, Target: manual(3), Settled: true, Now: t0.Add(59 * time.Second), Window: time.Minute, History: h})
	if p.Next != 6 || p.Wait != time.Second {
		t.Fatalf("inside the window: %+v", p)
	}
	p = Step(Facts{Current: 6, Target: manual(3), Settled: true, Now: t0.Add(time.Minute), Window: time.Minute, History: h})
	if p.Next != 5 {
		t.Fatalf("after the window: next=%d, want 5", p.Next)
	}
	h = reservation.Append(h, p.Records[len(p.Records)-1])
	p = Step(Facts{Current: 5, Target: manual(3), Settled: false, Now: t0.Add(time.Minute), Window: time.Minute, History: h})
	if p.Next != 5 || p.Blocked == "" {
		t.Fatalf("unsettled: must not shrink: %+v", p)
	}
	p = Step(Facts{Current: 5, Target: manual(3), Settled: true, Now: t0.Add(time.Minute), Window: time.Minute, History: h})
	if p.Next != 4 {
		t.Fatalf("settled under the same request: next=%d, want 4", p.Next)
	}
}

func TestDeeperRequestNeedsItsOwnWindow(t *testing.T) {
	h := []v1alpha1.CapacityDecision{{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionScaleInRequested, From: 6, To: 4}}
	p := Step(Facts{Current: 6, Target: manual(2), Settled: true, Now: t0.Add(time.Hour), Window: time.Minute, History: h})
	if p.Next != 6 || len(p.Records) != 1 || p.Records[0].To != 2 {
		t.Fatalf("a request below the standing one must wait again: %+v", p)
	}
}

func TestGrowEndsStandingRequest(t *testing.T) {
	h := []v1alpha1.CapacityDecision{
		{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionScaleInRequested, From: 6, To: 3},
		{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionGrow, From: 6, To: 8},
	}
	if _, ok := ScaleInAnchor(h, 3); ok {
		t.Fatal("a Grow must end the earlier scale-in request")
	}
}

// Clearing the history can only delay a scale-in, never allow an earlier one.
func TestEmptyHistoryIsAtLeastAsConservative(t *testing.T) {
	full := []v1alpha1.CapacityDecision{{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionScaleInRequested, From: 6, To: 3}}
	for _, at := range []time.Duration{0, 30 * time.Second, time.Minute, time.Hour} {
		now := t0.Add(at)
		withFull := Step(Facts{Current: 6, Target: manual(3), Settled: true, Now: now, Window: time.Minute, History: full})
		withNone := Step(Facts{Current: 6, Target: manual(3), Settled: true, Now: now, Window: time.Minute})
		if withNone.Next < withFull.Next {
			t.Fatalf("at +%s: empty history shrank to %d, full history to %d", at, withNone.Next, withFull.Next)
		}
	}
}

func TestTrimKeepsAnchor(t *testing.T) {
	var h []v1alpha1.CapacityDecision
	h = reservation.Append(h, v1alpha1.CapacityDecision{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionGrow, From: 0, To: 500})
	h = reservation.Append(h, v1alpha1.CapacityDecision{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionScaleInRequested, From: 500, To: 3})
	for n := int32(500); n > 400; n-- {
		h = reservation.Append(h, v1alpha1.CapacityDecision{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionShrinkOne, From: n, To: n - 1})
	}
	if len(h) != reservation.MaxHistory {
		t.Fatalf("history has %d entries, want %d", len(h), reservation.MaxHistory)
	}
	if a, ok := ScaleInAnchor(h, 3); !ok || a.To != 3 {
		t.Fatalf("trimming dropped the standing request's anchor: %v", h[:2])
	}
	if last := h[len(h)-1]; last.To != 400 {
		t.Fatalf("newest entry lost: %+v", last)
	}
}

func TestManualAndRecommendationSamePath(t *testing.T) {
	lo, hi := int32(2), int32(10)
	spec := &v1alpha1.CelldFleetSpec{Members: 4, Capacity: v1alpha1.CapacitySpec{Mode: v1alpha1.CapacityAuto, MinMembers: &lo, MaxMembers: &hi, TargetUtilization: 50}}
	tg := TargetFor(spec, &events.Utilization{Percent: 100, Members: 4}, 4)
	if tg.Members != 8 || tg.Source != v1alpha1.SourceRecommendation || tg.Kept {
		t.Fatalf("auto at 100%% of 50%% target on 4 members: %+v", tg)
	}
	tg = TargetFor(spec, &events.Utilization{Percent: 1, Members: 4}, 4)
	if tg.Members != 2 {
		t.Fatalf("recommendation must respect minMembers: %+v", tg)
	}
	tg = TargetFor(spec, &events.Utilization{Unavailable: true}, 4)
	if tg.Members != 4 || tg.Source != v1alpha1.SourceManual {
		t.Fatalf("without metrics the fleet stays at spec.members: %+v", tg)
	}
	for _, util := range []*events.Utilization{nil, {Unavailable: true}} {
		if tg = TargetFor(spec, util, 7); tg.Members != 7 || tg.Recommended != nil || !tg.Kept {
			t.Fatalf("without metrics (%+v) an Auto fleet of 7 keeps its size, kept rather than asked for: %+v", util, tg)
		}
	}
	if tg = TargetFor(spec, nil, 0); tg.Members != 4 {
		t.Fatalf("without metrics an Auto fleet is created at spec.members: %+v", tg)
	}
	spec.Capacity.Mode = v1alpha1.CapacityRecommend
	tg = TargetFor(spec, &events.Utilization{Percent: 100, Members: 4}, 4)
	if tg.Members != 4 || tg.Recommended == nil || *tg.Recommended != 8 {
		t.Fatalf("recommend mode shows but does not act: %+v", tg)
	}
}

// A request recorded ahead of this clock (a skewed replica, a restored backup) stands from now:
// its window starts now, neither earlier nor as late as the skew.
func TestRequestFromTheFutureStandsFromNow(t *testing.T) {
	ahead := []v1alpha1.CapacityDecision{{Time: metav1.NewTime(t0.Add(24 * time.Hour)), Kind: v1alpha1.DecisionScaleInRequested, From: 6, To: 3}}
	for _, c := range []struct {
		window time.Duration
		next   int32
		wait   time.Duration
	}{{0, 5, 0}, {time.Minute, 6, time.Minute}} {
		p := Step(Facts{Current: 6, Target: manual(3), Settled: true, Now: t0, Window: c.window, History: ahead})
		if p.Next != c.next || p.Wait != c.wait {
			t.Errorf("window %s, request a day ahead: next %d, wait %s; want %d, %s", c.window, p.Next, p.Wait, c.next, c.wait)
		}
	}
}

// A request without a window is recorded with the step it allows, in that step's write: held
// back by the previous change, it has nothing to time and costs no write of its own. With a
// window, the request is recorded at once, so the window runs while the change finishes.
func TestRequestRecordedWhenItTimesSomethingOrSteps(t *testing.T) {
	for _, tc := range []struct {
		window  time.Duration
		settled bool
		next    int32
		kinds   []v1alpha1.DecisionKind
	}{
		{0, false, 6, nil},
		{0, true, 5, []v1alpha1.DecisionKind{v1alpha1.DecisionScaleInRequested, v1alpha1.DecisionShrinkOne}},
		{time.Minute, false, 6, []v1alpha1.DecisionKind{v1alpha1.DecisionScaleInRequested}},
		{time.Minute, true, 6, []v1alpha1.DecisionKind{v1alpha1.DecisionScaleInRequested}},
	} {
		p := Step(Facts{Current: 6, Target: manual(3), Settled: tc.settled, Now: t0, Window: tc.window})
		var got []v1alpha1.DecisionKind
		for _, r := range p.Records {
			got = append(got, r.Kind)
		}
		if p.Next != tc.next || !slices.Equal(got, tc.kinds) || (!tc.settled && p.Blocked == "") {
			t.Errorf("window %s, settled %t: next %d, records %v, blocked %q; want next %d, records %v", tc.window, tc.settled, p.Next, got, p.Blocked, tc.next, tc.kinds)
		}
	}
}

// A member's node cordoned holds a scale-in back however long its request stood, and says so; a
// growth goes on; uncordoned, the next step takes the member away.
func TestMaintenanceHoldsScaleIn(t *testing.T) {
	const why = "node n1, where member a-2 runs, to be uncordoned"
	for _, window := range []time.Duration{0, time.Minute} {
		h := []v1alpha1.CapacityDecision{{Time: metav1Time(t0), Kind: v1alpha1.DecisionScaleInRequested, From: 6, To: 3}}
		now := t0.Add(time.Hour)
		p := Step(Facts{Current: 6, Target: manual(3), Settled: true, Maintenance: why, Now: now, Window: window, History: h})
		if p.Next != 6 || p.Blocked != why || len(p.Records) != 0 {
			t.Errorf("window %s, maintenance: next %d, blocked %q, records %v; want 6, %q, none", window, p.Next, p.Blocked, p.Records, why)
		}
		// A new request's window runs during maintenance: the window first, then the node.
		p = Step(Facts{Current: 6, Target: manual(3), Settled: true, Maintenance: why, Now: now, Window: window})
		if p.Next != 6 || (window == 0) != (p.Blocked == why) || p.Blocked == "" {
			t.Errorf("window %s, maintenance, a new request: next %d, blocked %q", window, p.Next, p.Blocked)
		}
		if window == 0 && len(p.Records) != 0 {
			t.Errorf("no window, maintenance: the request held back is recorded with its first step, not now: %v", p.Records)
		}
		p = Step(Facts{Current: 6, Target: manual(3), Settled: true, Now: now, Window: window, History: h})
		if p.Next != 5 || p.Blocked != "" {
			t.Errorf("window %s, uncordoned: next %d, blocked %q; want 5", window, p.Next, p.Blocked)
		}
		p = Step(Facts{Current: 3, Target: manual(6), Settled: true, Maintenance: why, Now: now, Window: window})
		if p.Next != 6 {
			t.Errorf("window %s, maintenance: growth to %d; want 6", window, p.Next)
		}
	}
}

// A request withdrawn (the target back to the size) is ended in the history, and asked for again
// it waits a window of its own; a request carried out to its end, or a size kept because nothing
// was observed, withdraws nothing.
func TestWithdrawnRequestWaitsAWindowOfItsOwn(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	asked := Step(Facts{Current: 6, Target: manual(3), Settled: true, Now: at(0), Window: time.Minute})
	h := asked.Records
	if len(h) != 1 || h[0].Kind != v1alpha1.DecisionScaleInRequested {
		t.Fatalf("a scale-in asked for: want its request recorded, got %+v", h)
	}

	kept := Step(Facts{Current: 6, Target: Target{Members: 6, Source: v1alpha1.SourceManual, Kept: true}, Settled: true, Now: at(10), Window: time.Minute, History: h})
	if len(kept.Records) != 0 || kept.Next != 6 {
		t.Fatalf("nothing observed: want nothing recorded and the size kept, got %+v", kept)
	}
	if p := Step(Facts{Current: 6, Target: manual(3), Settled: true, Now: at(60), Window: time.Minute, History: h}); p.Next != 5 {
		t.Fatalf("a window with a tick of nothing observed in it: want the first step at its end, got %+v", p)
	}

	back := Step(Facts{Current: 6, Target: manual(6), Settled: true, Now: at(10), Window: time.Minute, History: h})
	if len(back.Records) != 1 || back.Records[0].Kind != v1alpha1.DecisionScaleInWithdrawn || back.Records[0].From != 6 || back.Records[0].To != 6 {
		t.Fatalf("the target back to the size: want the request withdrawn, got %+v", back.Records)
	}
	h = reservation.AppendAll(h, back.Records)
	again := Step(Facts{Current: 6, Target: manual(3), Settled: true, Now: at(61), Window: time.Minute, History: h})
	if again.Next != 6 || again.Wait != time.Minute || len(again.Records) != 1 || again.Records[0].Kind != v1alpha1.DecisionScaleInRequested {
		t.Fatalf("asked again after a withdrawal: want a new request and a whole window, got %+v", again)
	}

	done := reservation.AppendAll(h[:1], []v1alpha1.CapacityDecision{
		{Time: metav1.NewTime(at(60)), Kind: v1alpha1.DecisionShrinkOne, From: 6, To: 5},
		{Time: metav1.NewTime(at(70)), Kind: v1alpha1.DecisionShrinkOne, From: 5, To: 4},
		{Time: metav1.NewTime(at(80)), Kind: v1alpha1.DecisionShrinkOne, From: 4, To: 3},
	})
	if p := Step(Facts{Current: 3, Target: manual(3), Settled: true, Now: at(90), Window: time.Minute, History: done}); len(p.Records) != 0 {
		t.Fatalf("a request carried out to its end: want nothing recorded, got %+v", p.Records)
	}
	if p := Step(Facts{Current: 4, Target: manual(4), Settled: true, Now: at(90), Window: time.Minute, History: done[:3]}); len(p.Records) != 1 || p.Records[0].Kind != v1alpha1.DecisionScaleInWithdrawn {
		t.Fatalf("a request stopped short of its end: want it withdrawn, got %+v", p.Records)
	}
}

// A decision kind this release does not know (written by a newer one, read after a rollback)
// ends every earlier request, as a Grow does: an operator never scales in on a record it cannot
// read, it asks again and waits a whole window.
func TestUnknownDecisionEndsEveryRequest(t *testing.T) {
	later := v1alpha1.DecisionKind("ScaleInPostponed")
	for _, h := range [][]v1alpha1.CapacityDecision{
		{{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionScaleInRequested, From: 6, To: 3}, {Time: metav1.NewTime(t0), Kind: later, From: 6, To: 6}},
		{{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionScaleInRequested, From: 6, To: 3}, {Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionShrinkOne, From: 6, To: 5},
			{Time: metav1.NewTime(t0), Kind: later, From: 5, To: 5}},
	} {
		current := h[len(h)-1].From
		if _, ok := ScaleInAnchor(h, 3); ok {
			t.Errorf("history %+v: a request stands across a decision of unknown kind", h)
		}
		p := Step(Facts{Current: current, Target: manual(3), Settled: true, Now: t0.Add(time.Hour), Window: time.Minute, History: h})
		if p.Next != current || p.Wait != time.Minute || len(p.Records) != 1 || p.Records[0].Kind != v1alpha1.DecisionScaleInRequested {
			t.Errorf("history %+v: want no step, a new request and a whole window; got next %d, wait %s, records %+v", h, p.Next, p.Wait, p.Records)
		}
	}
}

// A recommendation needs a fleet that runs and a sample with members in it: a sample of no
// members, or a fleet of none, sizes nothing (the floor is not a recommendation).
func TestNoRecommendationWithoutMembers(t *testing.T) {
	c := &v1alpha1.CapacitySpec{Mode: v1alpha1.CapacityRecommend, TargetUtilization: 50}
	for _, x := range []struct {
		name    string
		u       events.Utilization
		current int32
	}{
		{"a sample of no members", events.Utilization{Percent: 80, Members: 0}, 3},
		{"a fleet of no members", events.Utilization{Percent: 80, Members: 3}, 0},
	} {
		if n, ok := recommend(c, &x.u, x.current); ok {
			t.Errorf("%s: recommended %d", x.name, n)
		}
	}
	if n, ok := recommend(c, &events.Utilization{Percent: 80, Members: 3}, 3); !ok || n != 5 {
		t.Errorf("3 members at 80%% for a target of 50%%: recommended %d, %v; want 5", n, ok)
	}
}

// A target left at zero (an object written before the default) sizes for the default, never
// divides by it.
func TestZeroTargetIsTheDefault(t *testing.T) {
	u := &events.Utilization{Percent: 70, Members: 4}
	zero, ok := recommend(&v1alpha1.CapacitySpec{Mode: v1alpha1.CapacityRecommend}, u, 4)
	def, _ := recommend(&v1alpha1.CapacitySpec{Mode: v1alpha1.CapacityRecommend, TargetUtilization: DefaultTargetUtilization}, u, 4)
	if !ok || zero != def {
		t.Errorf("target 0 recommends %d (%v), the default %d", zero, ok, def)
	}
}

// A fleet that starts from no member records no Grow: it ends no request and would cost a write.
func TestGrowFromNothingRecordsNothing(t *testing.T) {
	if p := Step(Facts{Current: 0, Target: manual(3), Now: t0, Window: time.Minute}); p.Next != 3 || len(p.Records) != 0 {
		t.Fatalf("0 -> 3: %+v", p)
	}
}

// The record of a scale-in step says which member count it went from and to.
func TestShrinkRecordsFromAndTo(t *testing.T) {
	h := []v1alpha1.CapacityDecision{{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionScaleInRequested, From: 6, To: 3, Source: v1alpha1.SourceManual}}
	p := Step(Facts{Current: 6, Target: manual(3), Settled: true, Now: t0.Add(time.Minute), Window: time.Minute, History: h})
	if p.Next != 5 || len(p.Records) == 0 {
		t.Fatalf("after the window: %+v", p)
	}
	last := p.Records[len(p.Records)-1]
	if last.Kind != v1alpha1.DecisionShrinkOne || last.From != 6 || last.To != 5 {
		t.Fatalf("the step's record: %+v, want ShrinkOne 6 -> 5", last)
	}
}
