package machine

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// pacedStatus is a converging fleet's status, the base of the pacing tests' edits.
func pacedStatus() v1alpha1.CelldFleetStatus {
	seven := int32(7)
	return v1alpha1.CelldFleetStatus{
		ObservedGeneration: 2, State: v1alpha1.StateGrowing, Selector: "app=a",
		Members:            v1alpha1.MemberCounts{Desired: 6, Current: 4, Ready: 3, Updated: 4},
		RecommendedMembers: &seven,
		BlockedBy:          "member a-3 to be ready", NextAction: "wait for the new members",
		Disks: &v1alpha1.DiskAudit{Unused: []string{"data-a-9"}},
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonMembersNotReady, Message: "member a-3 to be ready", ObservedGeneration: 2},
			{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: ReasonInProgress, Message: "wait for the new members", ObservedGeneration: 2},
		},
	}
}

// TestStatusEqualSeesEverythingButTransitionTimes: any field a reader may read is a change worth
// writing, now or once the interval ends; only a condition's transition time is not (a status
// rebuilt from nothing cannot know it).
func TestStatusEqualSeesEverythingButTransitionTimes(t *testing.T) {
	eight := int32(8)
	cases := []struct {
		name  string
		edit  func(s *v1alpha1.CelldFleetStatus)
		equal bool
	}{
		{"nothing", func(s *v1alpha1.CelldFleetStatus) {}, true},
		{"a condition's transition time", func(s *v1alpha1.CelldFleetStatus) { s.Conditions[1].LastTransitionTime = metav1.Now() }, true},
		{"current count", func(s *v1alpha1.CelldFleetStatus) { s.Members.Current = 5 }, false},
		{"ready count", func(s *v1alpha1.CelldFleetStatus) { s.Members.Ready = 4 }, false},
		{"updated count", func(s *v1alpha1.CelldFleetStatus) { s.Members.Updated = 5 }, false},
		{"which member is waited for", func(s *v1alpha1.CelldFleetStatus) { s.BlockedBy = "member a-4 to be ready" }, false},
		{"the next step's wording", func(s *v1alpha1.CelldFleetStatus) { s.NextAction = "wait for member a-4" }, false},
		{"a condition's wording", func(s *v1alpha1.CelldFleetStatus) { s.Conditions[0].Message = "member a-4 to be ready" }, false},
		{"state", func(s *v1alpha1.CelldFleetStatus) { s.State = v1alpha1.StateSteady }, false},
		{"observed generation", func(s *v1alpha1.CelldFleetStatus) { s.ObservedGeneration = 3 }, false},
		{"desired size", func(s *v1alpha1.CelldFleetStatus) { s.Members.Desired = 5 }, false},
		{"selector", func(s *v1alpha1.CelldFleetStatus) { s.Selector = "app=b" }, false},
		{"blocked by nothing any more", func(s *v1alpha1.CelldFleetStatus) { s.BlockedBy = "" }, false},
		{"no next step any more", func(s *v1alpha1.CelldFleetStatus) { s.NextAction = "" }, false},
		{"recommendation changed", func(s *v1alpha1.CelldFleetStatus) { s.RecommendedMembers = &eight }, false},
		{"recommendation gone", func(s *v1alpha1.CelldFleetStatus) { s.RecommendedMembers = nil }, false},
		{"an unused disk more", func(s *v1alpha1.CelldFleetStatus) { s.Disks.Unused = append(s.Disks.Unused, "data-a-8") }, false},
		{"a foreign disk", func(s *v1alpha1.CelldFleetStatus) { s.Disks.Foreign = []string{"data-a-7"} }, false},
		{"disk audit gone", func(s *v1alpha1.CelldFleetStatus) { s.Disks = nil }, false},
		{"a condition's status", func(s *v1alpha1.CelldFleetStatus) { s.Conditions[0].Status = metav1.ConditionTrue }, false},
		{"a condition's reason", func(s *v1alpha1.CelldFleetStatus) { s.Conditions[1].Reason = ReasonMemberStuck }, false},
		{"a condition's generation", func(s *v1alpha1.CelldFleetStatus) { s.Conditions[1].ObservedGeneration = 3 }, false},
		{"a condition more", func(s *v1alpha1.CelldFleetStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: ReasonMemberStuck})
		}, false},
		{"a condition's type", func(s *v1alpha1.CelldFleetStatus) { s.Conditions[1].Type = v1alpha1.ConditionDegraded }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base, edited := pacedStatus(), pacedStatus()
			c.edit(&edited)
			if got := statusEqual(&edited, &base); got != c.equal {
				t.Errorf("statusEqual(edited, published) = %t, want %t", got, c.equal)
			}
			if got := statusEqual(&base, &edited); got != c.equal {
				t.Errorf("statusEqual(published, edited) = %t, want %t", got, c.equal)
			}
		})
	}
}

func TestStatusHoldWaitsOutTheInterval(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	progress := func(s *v1alpha1.CelldFleetStatus) { s.Members.Ready = 4 }
	ready := func(s *v1alpha1.CelldFleetStatus) {
		s.Conditions[0].Status, s.Conditions[0].Reason = metav1.ConditionTrue, ReasonConverged
	}
	degraded := func(s *v1alpha1.CelldFleetStatus) {
		s.Conditions = append(s.Conditions, metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: ReasonMemberStuck})
	}
	// lost is a last write asked for that the fleet does not show: it failed, was never sent, or
	// someone else wrote the status since.
	lost := func(s *v1alpha1.CelldFleetStatus) { s.Members.Current = 9 }
	deleting := func(s *v1alpha1.CelldFleetStatus) {
		s.State, s.BlockedBy = v1alpha1.StateDeleting, "3 member Pods to terminate"
	}
	cases := []struct {
		name      string
		published time.Time // when the machine last asked for a write; zero: never (a restart)
		now       time.Time
		next      func(s *v1alpha1.CelldFleetStatus)
		want      time.Duration
		asked     func(s *v1alpha1.CelldFleetStatus) // the last status asked for, from the one the fleet shows; nil: the same
		deleted   time.Time                          // when the fleet's deletion was requested; zero: it was not
		created   time.Time                          // a new fleet's creation, showing no status yet; zero: an old fleet with its status
	}{
		{"progress right after a write", t0, t0, progress, ProgressInterval, nil, time.Time{}, time.Time{}},
		{"progress 3s after a write", t0, t0.Add(3 * time.Second), progress, ProgressInterval - 3*time.Second, nil, time.Time{}, time.Time{}},
		{"progress a moment before the interval ends", t0, t0.Add(ProgressInterval - time.Millisecond), progress, time.Millisecond, nil, time.Time{}, time.Time{}},
		{"progress at the interval's end", t0, t0.Add(ProgressInterval), progress, 0, nil, time.Time{}, time.Time{}},
		{"progress long after", t0, t0.Add(time.Hour), progress, 0, nil, time.Time{}, time.Time{}},
		{"progress with a clock that went back", t0, t0.Add(-time.Minute), progress, ProgressInterval, nil, time.Time{}, time.Time{}},
		{"progress after a restart", time.Time{}, t0, progress, 0, nil, time.Time{}, time.Time{}},
		{"a state change right after a write", t0, t0.Add(time.Second), func(s *v1alpha1.CelldFleetStatus) { s.State = v1alpha1.StateSteady }, ProgressInterval - time.Second, nil, time.Time{}, time.Time{}},
		{"a fleet turning Degraded 4s after a write", t0, t0.Add(4 * time.Second), degraded, ProgressInterval - 4*time.Second, nil, time.Time{}, time.Time{}},
		{"a state change after a restart", time.Time{}, t0, func(s *v1alpha1.CelldFleetStatus) { s.State = v1alpha1.StateSteady }, 0, nil, time.Time{}, time.Time{}},
		{"a fleet that arrives", t0, t0.Add(time.Second), func(s *v1alpha1.CelldFleetStatus) { progress(s); ready(s) }, 0, nil, time.Time{}, time.Time{}},
		{"progress right after a write the fleet does not show", t0, t0.Add(time.Second), progress, 0, lost, time.Time{}, time.Time{}},
		{"a state change right after a write the fleet does not show", t0, t0.Add(time.Second), func(s *v1alpha1.CelldFleetStatus) { s.State = v1alpha1.StateSteady }, 0, lost, time.Time{}, time.Time{}},
		{"progress right after a write whose transition times the fleet shows otherwise", t0, t0.Add(time.Second), progress, ProgressInterval - time.Second,
			func(s *v1alpha1.CelldFleetStatus) { s.Conditions[0].LastTransitionTime = metav1.NewTime(t0) }, time.Time{}, time.Time{}},
		// A deletion: its first status waits one interval from the deletion's timestamp, whoever
		// asked for a write last, so a deletion nothing holds up writes no status at all.
		{"a deletion as it is requested", time.Time{}, t0, deleting, ProgressInterval, nil, t0, time.Time{}},
		{"a deletion 3s in, after a restart", time.Time{}, t0.Add(3 * time.Second), deleting, ProgressInterval - 3*time.Second, nil, t0, time.Time{}},
		{"a deletion 3s in, a moment after a write", t0.Add(2 * time.Second), t0.Add(3 * time.Second), deleting, ProgressInterval - 3*time.Second, nil, t0, time.Time{}},
		{"a deletion 3s in, after a write the fleet does not show", t0.Add(2 * time.Second), t0.Add(3 * time.Second), deleting, ProgressInterval - 3*time.Second, lost, t0, time.Time{}},
		{"a deletion held up for its interval", time.Time{}, t0.Add(ProgressInterval), deleting, 0, nil, t0, time.Time{}},
		{"a deletion held up long, right after a write", t0.Add(time.Minute), t0.Add(time.Minute + time.Second), deleting, ProgressInterval - time.Second, nil, t0, time.Time{}},
		{"a deletion timestamped ahead of this clock", time.Time{}, t0, deleting, 0, nil, t0.Add(time.Second), time.Time{}},
		{"a deletion's status on the fleet before it is Deleting", time.Time{}, t0, progress, 0, nil, t0, time.Time{}},
		// A new fleet: its first status waits one interval from its creation, so one that arrives
		// within it is written once, Ready.
		{"a new fleet as it is created", time.Time{}, t0, progress, ProgressInterval, nil, time.Time{}, t0},
		{"a new fleet 3s in", time.Time{}, t0.Add(3 * time.Second), progress, ProgressInterval - 3*time.Second, nil, time.Time{}, t0},
		{"a new fleet a moment before its interval ends", time.Time{}, t0.Add(ProgressInterval - time.Millisecond), progress, time.Millisecond, nil, time.Time{}, t0},
		{"a new fleet at its interval's end", time.Time{}, t0.Add(ProgressInterval), progress, 0, nil, time.Time{}, t0},
		{"a new fleet that arrives 3s in", time.Time{}, t0.Add(3 * time.Second), func(s *v1alpha1.CelldFleetStatus) { progress(s); ready(s) }, 0, nil, time.Time{}, t0},
		{"a new fleet Degraded 3s in", time.Time{}, t0.Add(3 * time.Second), degraded, 0, nil, time.Time{}, t0},
		{"a new fleet timestamped ahead of this clock", time.Time{}, t0, progress, 0, nil, time.Time{}, t0.Add(time.Second)},
		{"a new fleet deleted 1s in", time.Time{}, t0.Add(2 * time.Second), deleting, ProgressInterval - time.Second, nil, t0.Add(time.Second), t0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			published, next := pacedStatus(), pacedStatus()
			c.next(&next)
			asked := pacedStatus()
			if c.asked != nil {
				c.asked(&asked)
			}
			m := New()
			m.published, m.asked = c.published, &asked
			if c.published.IsZero() {
				m.asked = nil
			}
			f := &v1alpha1.CelldFleet{Status: published}
			if !c.created.IsZero() {
				f.CreationTimestamp, f.Status = metav1.Time{Time: c.created}, v1alpha1.CelldFleetStatus{}
			}
			if !c.deleted.IsZero() {
				f.DeletionTimestamp = &metav1.Time{Time: c.deleted}
			}
			if got := m.statusHold(f, &next, c.now); got != c.want {
				t.Errorf("statusHold = %v, want %v", got, c.want)
			}
		})
	}
}

// TestCreationHoldOnlyBeforeTheFirstStatus: a fleet young enough for the creation hold that
// shows a status (written by an operator that then restarted, or by anyone) is paced as any
// other; any field of a status counts as one.
func TestCreationHoldOnlyBeforeTheFirstStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	shown := map[string]func(s *v1alpha1.CelldFleetStatus){
		"a whole status":      func(s *v1alpha1.CelldFleetStatus) { *s = pacedStatus() },
		"a state alone":       func(s *v1alpha1.CelldFleetStatus) { s.State = v1alpha1.StateProvisioning },
		"a generation alone":  func(s *v1alpha1.CelldFleetStatus) { s.ObservedGeneration = 1 },
		"a condition alone":   func(s *v1alpha1.CelldFleetStatus) { s.Conditions = pacedStatus().Conditions[:1] },
		"member counts alone": func(s *v1alpha1.CelldFleetStatus) { s.Members.Desired = 3 },
	}
	for name, show := range shown {
		t.Run(name, func(t *testing.T) {
			f := &v1alpha1.CelldFleet{}
			f.CreationTimestamp = metav1.Time{Time: t0}
			show(&f.Status)
			next := pacedStatus()
			next.Members.Ready = 4
			if got := New().statusHold(f, &next, t0.Add(time.Second)); got != 0 {
				t.Errorf("statusHold = %v, want 0: the fleet shows a status, and this machine asked for none", got)
			}
		})
	}
}

// TestStatusIsWrittenOncePerInterval grows a fleet in the machine's world, one pass per 5 s
// tick, and judges the status writes from what the world recorded: no two writes within the
// interval but for the fleet that arrives, which carries its final status at once; a status is
// held back only while the last write is younger than the interval (and asks for the sync that
// writes it).
func TestStatusIsWrittenOncePerInterval(t *testing.T) {
	w := newWorld(v1alpha1.ProfilePersistentFleet, 1)
	m := New()
	type write struct {
		at time.Time
		st v1alpha1.CelldFleetStatus
	}
	var writes []write
	holds := 0
	var last Decision
	for i := 0; i < 60; i++ {
		if i == 6 {
			w.fleet.Spec.Members, w.fleet.Generation = 6, w.fleet.Generation+1
		}
		v := events.Normalize(worldNS, worldName, w.observe())
		d := m.Step(&v)
		published := *w.fleet.Status.DeepCopy()
		wrote, held := false, time.Duration(0)
		for _, a := range d.Actions {
			if a.Kind == Requeue {
				if strings.HasPrefix(a.Key, StatusRequeuePrefix) {
					held = a.After
				}
				continue
			}
			if err := a.Premise.Check(w.fresh(a.Premise)); err != nil {
				t.Fatalf("%s: premise refused %s: %v", w.now.Format(time.TimeOnly), a.Key, err)
			}
			if err := w.apply(a); err != nil {
				t.Fatalf("%s: %v", w.now.Format(time.TimeOnly), err)
			}
			if a.Kind == PublishStatus {
				wrote = true
				writes = append(writes, write{w.now, *a.Status.DeepCopy()})
			}
		}
		// The loop's acknowledgment: every action was made.
		m.Advance(d.Actions, v.Now)
		switch changed := !sameStatusByTest(&d.Status, &published, false); {
		case wrote && held > 0:
			t.Fatalf("%s: the status was written and held back in one decision", w.now.Format(time.TimeOnly))
		case !wrote && changed:
			holds++
			if held <= 0 || held > ProgressInterval {
				t.Fatalf("%s: a changed status was neither written nor asked to be synced within the interval (requeue %v)", w.now.Format(time.TimeOnly), held)
			}
			// A new fleet's first status is timed from its creation.
			since := w.fleet.CreationTimestamp.Time
			if len(writes) > 0 {
				since = writes[len(writes)-1].at
			}
			if w.now.Sub(since) >= ProgressInterval {
				t.Fatalf("%s: progress held back although no status was written in the last %v (nor the fleet created)", w.now.Format(time.TimeOnly), ProgressInterval)
			}
		case !wrote && held > 0:
			t.Fatalf("%s: a status sync asked for with nothing to write", w.now.Format(time.TimeOnly))
		}
		last = d
		w.tick()
	}
	for k := 1; k < len(writes); k++ {
		prev, cur := writes[k-1], writes[k]
		arrives := findCondition(cur.st.Conditions, v1alpha1.ConditionReady).Status == metav1.ConditionTrue
		if !arrives && cur.at.Sub(prev.at) < ProgressInterval {
			t.Errorf("status written at %s, %v after the previous write, and the fleet is not Ready", cur.at.Format(time.TimeOnly), cur.at.Sub(prev.at))
		}
	}
	if holds == 0 {
		t.Errorf("a fleet growing 1 -> 6, a member every 5 s, held no progress back (%d status writes)", len(writes))
	}
	st := &w.fleet.Status
	if st.State != v1alpha1.StateSteady || st.Members.Ready != 6 || !statusEqual(&last.Status, st) {
		t.Errorf("the converged fleet's published status is not its last decision's:\n  published: %+v\n  decided: %+v", *st, last.Status)
	}
	if c := findCondition(st.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("the converged fleet is not published Ready: %+v", st.Conditions)
	}
}

// sameStatusByTest compares two statuses by the test's own rules, ignoring condition times;
// forReader ignores progress too (the counts on the way, what is waited for and done next, wording).
func sameStatusByTest(a, b *v1alpha1.CelldFleetStatus, forReader bool) bool {
	if a.State != b.State || a.ObservedGeneration != b.ObservedGeneration || a.Members.Desired != b.Members.Desired ||
		a.Selector != b.Selector || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	if !forReader && (a.Members != b.Members || a.BlockedBy != b.BlockedBy || a.NextAction != b.NextAction) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.ObservedGeneration != y.ObservedGeneration ||
			(!forReader && x.Message != y.Message) {
			return false
		}
	}
	return true
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// TestDegradedWarningGoesWithTheWrite grows a fleet onto a member that never becomes ready, one
// pass per 5 s tick: the fleet turns Degraded (MemberStuck) while its status writes are paced,
// and the Warning that says so is sent once, in the decision that writes the status showing it,
// however many passes the write was held back for.
func TestDegradedWarningGoesWithTheWrite(t *testing.T) {
	// An interval longer than the member's grace period: the fleet turns Degraded while a write
	// is held back.
	defer func(d time.Duration) { ProgressInterval = d }(ProgressInterval)
	ProgressInterval = 3 * worldGrace
	w := newWorld(v1alpha1.ProfilePersistentFleet, 3)
	w.broken["a-3"] = true
	m := New()
	warnings, held := 0, 0
	for i := 0; i < 60; i++ {
		if i == 8 {
			w.fleet.Spec.Members, w.fleet.Generation = 4, w.fleet.Generation+1
		}
		v := events.Normalize(worldNS, worldName, w.observe())
		d := m.Step(&v)
		var warned, wrote *Action
		for j, a := range d.Actions {
			switch {
			case a.Kind == RecordEvent && strings.HasPrefix(a.Key, "event/degraded/"):
				warned = &d.Actions[j]
			case a.Kind == PublishStatus:
				wrote = &d.Actions[j]
			case a.Kind == Requeue && strings.HasPrefix(a.Key, StatusRequeuePrefix):
				held++
			}
			if a.Kind == Requeue {
				continue
			}
			if err := w.apply(a); err != nil {
				t.Fatalf("%s: %v", w.now.Format(time.TimeOnly), err)
			}
		}
		if warned != nil {
			warnings++
			c := findCondition(d.Status.Conditions, v1alpha1.ConditionDegraded)
			if wrote == nil {
				t.Fatalf("%s: Warning %s sent without the status write that shows it", w.now.Format(time.TimeOnly), warned.Reason)
			}
			if wc := findCondition(wrote.Status.Conditions, v1alpha1.ConditionDegraded); wc == nil || wc.Status != metav1.ConditionTrue || wc.Reason != warned.Reason || c.Reason != warned.Reason {
				t.Fatalf("%s: Warning %s sent with a status that does not show it: %+v", w.now.Format(time.TimeOnly), warned.Reason, wrote.Status.Conditions)
			}
		}
		w.tick()
	}
	c := findCondition(w.fleet.Status.Conditions, v1alpha1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonMemberStuck {
		t.Fatalf("the fleet with a member that never becomes ready is not published Degraded=MemberStuck: %+v", w.fleet.Status.Conditions)
	}
	if warnings != 1 {
		t.Errorf("%d Warnings for one Degraded reason, want 1", warnings)
	}
	if held == 0 {
		t.Errorf("no status write was held back: the test does not exercise the pacing")
	}
}

func TestReaderActsSeesStateAndConditions(t *testing.T) {
	published := v1alpha1.CelldFleetStatus{State: v1alpha1.StateGrowing, Members: v1alpha1.MemberCounts{Current: 3},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "MembersNotReady"}}}
	cases := []struct {
		name string
		edit func(st *v1alpha1.CelldFleetStatus)
		want bool
	}{
		{"counts only", func(st *v1alpha1.CelldFleetStatus) { st.Members.Current, st.Members.Ready = 5, 4 }, false},
		{"a condition's message only", func(st *v1alpha1.CelldFleetStatus) { st.Conditions[0].Message = "2 of 5 ready" }, false},
		{"the state", func(st *v1alpha1.CelldFleetStatus) { st.State = v1alpha1.StateSteady }, true},
		{"the generation observed", func(st *v1alpha1.CelldFleetStatus) { st.ObservedGeneration++ }, true},
		{"a condition's status", func(st *v1alpha1.CelldFleetStatus) { st.Conditions[0].Status = metav1.ConditionTrue }, true},
		{"a condition's reason", func(st *v1alpha1.CelldFleetStatus) { st.Conditions[0].Reason = "MemberStuck" }, true},
		{"a condition's type", func(st *v1alpha1.CelldFleetStatus) { st.Conditions[0].Type = v1alpha1.ConditionDegraded }, true},
		{"a condition more", func(st *v1alpha1.CelldFleetStatus) {
			st.Conditions = append(st.Conditions, metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue})
		}, true},
	}
	for _, c := range cases {
		st := published.DeepCopy()
		c.edit(st)
		if got := ReaderActs(&published, st); got != c.want {
			t.Errorf("%s: ReaderActs = %v, want %v", c.name, got, c.want)
		}
	}
	if !ReaderActs(nil, published.DeepCopy()) {
		t.Error("a fleet's first status: ReaderActs = false, want true")
	}
}

// TestScaleInPremiseNamesTheNodesSeen: a scale-in's premise names the nodes the decision saw the
// members on, each once, so a driver can read them beside the members' list.
func TestScaleInPremiseNamesTheNodesSeen(t *testing.T) {
	w := newWorld(v1alpha1.ProfilePersistentFleet, 4)
	m := New()
	for i := 0; i < 60; i++ {
		if i == 2 {
			w.fleet.Spec.Members, w.fleet.Generation = 3, w.fleet.Generation+1
		}
		v := events.Normalize(worldNS, worldName, w.observe())
		d := m.Step(&v)
		for _, a := range d.Actions {
			if a.Kind == Apply && a.Premise != nil && a.Premise.RolledOut && len(a.Premise.Ready) > 0 {
				var want []string
				for _, mb := range v.Members {
					if mb.NodeName != "" && !slices.Contains(want, mb.NodeName) {
						want = append(want, mb.NodeName)
					}
				}
				slices.Sort(want)
				if len(want) == 0 || !slices.Equal(a.Premise.Nodes, want) {
					t.Fatalf("the scale-in's premise names nodes %v; the decision saw the members on %v", a.Premise.Nodes, want)
				}
				return
			}
			if a.Kind == Requeue {
				continue
			}
			if err := a.Premise.Check(w.fresh(a.Premise)); err != nil {
				t.Fatalf("premise refused %s: %v", a.Key, err)
			}
			if err := w.apply(a); err != nil {
				t.Fatal(err)
			}
		}
		m.Advance(d.Actions, v.Now)
		w.tick()
	}
	t.Fatal("no scale-in in 60 ticks")
}
