package machine

import (
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

func TestReaderActsOnWhatChangesADecisionNotOnProgress(t *testing.T) {
	eight := int32(8)
	cases := []struct {
		name string
		edit func(s *v1alpha1.CelldFleetStatus)
		acts bool
	}{
		{"nothing", func(s *v1alpha1.CelldFleetStatus) {}, false},
		{"current count", func(s *v1alpha1.CelldFleetStatus) { s.Members.Current = 5 }, false},
		{"ready count", func(s *v1alpha1.CelldFleetStatus) { s.Members.Ready = 4 }, false},
		{"updated count", func(s *v1alpha1.CelldFleetStatus) { s.Members.Updated = 5 }, false},
		{"which member is waited for", func(s *v1alpha1.CelldFleetStatus) { s.BlockedBy = "member a-4 to be ready" }, false},
		{"the next step's wording", func(s *v1alpha1.CelldFleetStatus) { s.NextAction = "wait for member a-4" }, false},
		{"a condition's wording", func(s *v1alpha1.CelldFleetStatus) { s.Conditions[0].Message = "member a-4 to be ready" }, false},
		{"a condition's transition time", func(s *v1alpha1.CelldFleetStatus) { s.Conditions[1].LastTransitionTime = metav1.Now() }, false},
		{"state", func(s *v1alpha1.CelldFleetStatus) { s.State = v1alpha1.StateSteady }, true},
		{"observed generation", func(s *v1alpha1.CelldFleetStatus) { s.ObservedGeneration = 3 }, true},
		{"desired size", func(s *v1alpha1.CelldFleetStatus) { s.Members.Desired = 5 }, true},
		{"selector", func(s *v1alpha1.CelldFleetStatus) { s.Selector = "app=b" }, true},
		{"blocked by nothing any more", func(s *v1alpha1.CelldFleetStatus) { s.BlockedBy = "" }, false},
		{"no next step any more", func(s *v1alpha1.CelldFleetStatus) { s.NextAction = "" }, false},
		{"recommendation changed", func(s *v1alpha1.CelldFleetStatus) { s.RecommendedMembers = &eight }, true},
		{"recommendation gone", func(s *v1alpha1.CelldFleetStatus) { s.RecommendedMembers = nil }, true},
		{"an unused disk more", func(s *v1alpha1.CelldFleetStatus) { s.Disks.Unused = append(s.Disks.Unused, "data-a-8") }, true},
		{"a foreign disk", func(s *v1alpha1.CelldFleetStatus) { s.Disks.Foreign = []string{"data-a-7"} }, true},
		{"disk audit gone", func(s *v1alpha1.CelldFleetStatus) { s.Disks = nil }, true},
		{"a condition's status", func(s *v1alpha1.CelldFleetStatus) { s.Conditions[0].Status = metav1.ConditionTrue }, true},
		{"a condition's reason", func(s *v1alpha1.CelldFleetStatus) { s.Conditions[1].Reason = ReasonMemberStuck }, true},
		{"a condition's generation", func(s *v1alpha1.CelldFleetStatus) { s.Conditions[1].ObservedGeneration = 3 }, true},
		{"a condition more", func(s *v1alpha1.CelldFleetStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: ReasonMemberStuck})
		}, true},
		{"a condition's type", func(s *v1alpha1.CelldFleetStatus) { s.Conditions[1].Type = v1alpha1.ConditionDegraded }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base, edited := pacedStatus(), pacedStatus()
			c.edit(&edited)
			if got := ReaderActs(&edited, &base); got != c.acts {
				t.Errorf("ReaderActs(edited, published) = %t, want %t", got, c.acts)
			}
			if got := ReaderActs(&base, &edited); got != c.acts {
				t.Errorf("ReaderActs(published, edited) = %t, want %t", got, c.acts)
			}
			// Anything but a condition's transition time is a change worth writing, now or later.
			if equal, want := statusEqual(&edited, &base), c.name == "nothing" || c.name == "a condition's transition time"; equal != want {
				t.Errorf("statusEqual = %t, want %t", equal, want)
			}
		})
	}
}

func TestStatusHoldWaitsOutTheIntervalForProgressAlone(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	progress := func(s *v1alpha1.CelldFleetStatus) { s.Members.Ready = 4 }
	ready := func(s *v1alpha1.CelldFleetStatus) {
		s.Conditions[0].Status, s.Conditions[0].Reason = metav1.ConditionTrue, ReasonConverged
	}
	cases := []struct {
		name                string
		published           time.Time // when the machine last asked for a write; zero: never (a restart)
		now                 time.Time
		publishedEdit, next func(s *v1alpha1.CelldFleetStatus)
		want                time.Duration
	}{
		{"progress right after a write", t0, t0, nil, progress, ProgressInterval},
		{"progress 3s after a write", t0, t0.Add(3 * time.Second), nil, progress, ProgressInterval - 3*time.Second},
		{"progress a moment before the interval ends", t0, t0.Add(ProgressInterval - time.Millisecond), nil, progress, time.Millisecond},
		{"progress at the interval's end", t0, t0.Add(ProgressInterval), nil, progress, 0},
		{"progress long after", t0, t0.Add(time.Hour), nil, progress, 0},
		{"progress with a clock that went back", t0, t0.Add(-time.Minute), nil, progress, ProgressInterval},
		{"progress after a restart", time.Time{}, t0, nil, progress, 0},
		{"a state change right after a write", t0, t0.Add(time.Second), nil, func(s *v1alpha1.CelldFleetStatus) { s.State = v1alpha1.StateSteady }, 0},
		{"a fleet that arrives", t0, t0.Add(time.Second), nil, func(s *v1alpha1.CelldFleetStatus) { progress(s); ready(s) }, 0},
		{"counts of a Ready fleet", t0, t0.Add(time.Second), ready, func(s *v1alpha1.CelldFleetStatus) { ready(s); progress(s) }, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			published, next := pacedStatus(), pacedStatus()
			if c.publishedEdit != nil {
				c.publishedEdit(&published)
			}
			c.next(&next)
			m := New()
			m.published = c.published
			if got := m.statusHold(&next, &published, c.now); got != c.want {
				t.Errorf("statusHold = %v, want %v", got, c.want)
			}
		})
	}
}

// TestProgressIsWrittenOncePerInterval grows a fleet in the machine's world, one pass per 5 s
// tick, and judges the status writes from what the world recorded: progress alone is never
// written twice within the interval, a status is held back only while the last write is younger
// than the interval (and asks for the sync that writes it), and the fleet that arrives carries
// its final status at once.
func TestProgressIsWrittenOncePerInterval(t *testing.T) {
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
		switch changed := !sameStatusByTest(&d.Status, &published, false); {
		case wrote && held > 0:
			t.Fatalf("%s: the status was written and held back in one decision", w.now.Format(time.TimeOnly))
		case !wrote && changed:
			holds++
			if held <= 0 || held > ProgressInterval {
				t.Fatalf("%s: a changed status was neither written nor asked to be synced within the interval (requeue %v)", w.now.Format(time.TimeOnly), held)
			}
			if !sameStatusByTest(&d.Status, &published, true) {
				t.Fatalf("%s: a change a reader acts on was held back:\n  decided: %+v\n  published: %+v", w.now.Format(time.TimeOnly), d.Status, published)
			}
			if len(writes) == 0 || w.now.Sub(writes[len(writes)-1].at) >= ProgressInterval {
				t.Fatalf("%s: progress held back although no status was written in the last %v", w.now.Format(time.TimeOnly), ProgressInterval)
			}
		case !wrote && held > 0:
			t.Fatalf("%s: a status sync asked for with nothing to write", w.now.Format(time.TimeOnly))
		}
		last = d
		w.tick()
	}
	for k := 1; k < len(writes); k++ {
		prev, cur := writes[k-1], writes[k]
		if sameStatusByTest(&cur.st, &prev.st, true) && cur.at.Sub(prev.at) < ProgressInterval {
			t.Errorf("progress alone written at %s, %v after the previous write", cur.at.Format(time.TimeOnly), cur.at.Sub(prev.at))
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
