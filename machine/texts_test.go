package machine

import (
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/capacity"
	"github.com/celld/celld-operator/events"
)

// capacityAt is a settled Bucket fleet of two in capacity mode mode with target utilization
// target (0: unset), and the CapacityObserved condition a fresh machine gives it on usage u.
func capacityAt(t *testing.T, mode v1alpha1.CapacityMode, target int32, u *events.Utilization) (metav1.Condition, bool) {
	t.Helper()
	r := newRun(t, v1alpha1.ProfileBucket, 2, map[string]int{})
	r.settle()
	c := &r.w.fleet.Spec.Capacity
	c.Mode, c.TargetUtilization = mode, target
	r.w.fleet.Generation++
	o := r.w.observe()
	if u != nil {
		u.Time = r.w.now
	}
	o.Utilization = u
	v := events.Normalize(worldNS, worldName, o)
	if c := apimeta.FindStatusCondition(New().Step(&v).Status.Conditions, ConditionCapacityObserved); c != nil {
		return *c, true
	}
	return metav1.Condition{}, false
}

// requeueAfter is when the decision asks to be stepped again; 0 when it does not.
func requeueAfter(d Decision) time.Duration {
	for _, a := range d.Actions {
		if a.Kind == Requeue {
			return a.After
		}
	}
	return 0
}

// The CapacityObserved condition is the fleet's when its mode reads usage, and says what the
// mode does while nothing is observed; the target it quotes is the spec's, or the default.
func TestCapacityConditionFollowsTheMode(t *testing.T) {
	if c, ok := capacityAt(t, v1alpha1.CapacityManual, 0, nil); ok {
		t.Errorf("Manual: want no %s condition, got %s %s", ConditionCapacityObserved, c.Reason, c.Message)
	}
	for mode, keeps := range map[v1alpha1.CapacityMode]string{
		v1alpha1.CapacityRecommend: "the fleet stays at spec.members",
		v1alpha1.CapacityAuto:      "the fleet keeps its size",
	} {
		c, ok := capacityAt(t, mode, 0, nil)
		if !ok || c.Status != metav1.ConditionFalse || !strings.HasSuffix(c.Message, ": "+keeps) {
			t.Errorf("%s, no usage: want False ending %q, got %t %s %s", mode, keeps, ok, c.Status, c.Message)
		}
	}
	for _, tc := range []struct {
		target int32
		want   string
	}{{0, "target 70%"}, {50, "target 50%"}, {90, "target 90%"}} {
		if capacity.DefaultTargetUtilization != 70 {
			t.Fatalf("the default target is %d: update the cases", capacity.DefaultTargetUtilization)
		}
		c, ok := capacityAt(t, v1alpha1.CapacityRecommend, tc.target, &events.Utilization{Percent: 40, Members: 2})
		if !ok || !strings.Contains(c.Message, tc.want) {
			t.Errorf("targetUtilization %d: want %q in the message, got %t %s", tc.target, tc.want, ok, c.Message)
		}
	}
}

// A fleet's status says what the operator does next and, when it waits, for what; at rest it
// names no next step and carries no disk audit.
func TestStatusSaysWhatComesNextAndWhatItWaitsFor(t *testing.T) {
	r := newRun(t, v1alpha1.ProfilePersistentFleet, 3, map[string]int{})
	r.settle()
	decide := func() v1alpha1.CelldFleetStatus {
		v := events.Normalize(worldNS, worldName, r.w.observe())
		return New().Step(&v).Status
	}
	progressing := func(st v1alpha1.CelldFleetStatus) metav1.Condition {
		c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing)
		if c == nil {
			t.Fatalf("no Progressing condition: %+v", st.Conditions)
		}
		return *c
	}

	st := decide()
	if st.NextAction != "" || st.BlockedBy != "" || st.Disks != nil {
		t.Errorf("at rest: nextAction %q, blockedBy %q, disks %+v; want none", st.NextAction, st.BlockedBy, st.Disks)
	}

	r.w.fleet.Spec.Members = 4
	r.w.fleet.Generation++
	st = decide()
	if want := "set the workload to 4 members"; st.NextAction != want || progressing(st).Message != want {
		t.Errorf("grown to 4: nextAction %q, Progressing %q; want %q", st.NextAction, progressing(st).Message, want)
	}

	r.w.fleet.Spec.Members = 3
	r.w.fleet.Generation++
	p := r.w.members()[1]
	setPodReady(p, false, r.w.now)
	st = decide()
	if want := "member " + p.Name + " to be ready"; st.NextAction != "" || !strings.Contains(st.BlockedBy, want) {
		t.Errorf("a member not ready: nextAction %q, blockedBy %q; want blockedBy naming %q", st.NextAction, st.BlockedBy, want)
	}
	if c := progressing(st); c.Message != "waiting for "+st.BlockedBy {
		t.Errorf("a member not ready: Progressing %s %q; want \"waiting for %s\"", c.Status, c.Message, st.BlockedBy)
	}
}

// A published status's log line carries its state and sizes, and what blocks the fleet when
// something does.
func TestPublishStatusLineCarriesTheStatus(t *testing.T) {
	st := &v1alpha1.CelldFleetStatus{State: v1alpha1.StateSteady, Members: v1alpha1.MemberCounts{Desired: 3, Current: 3, Ready: 2}}
	a := Action{Kind: PublishStatus, Key: "status/ns/a", Status: st}
	if got, want := a.String(), "state=Steady desired=3 current=3 ready=2"; !strings.Contains(got, want) || strings.Contains(got, "blockedBy") {
		t.Errorf("got %q, want %q and no blockedBy", got, want)
	}
	st.BlockedBy = "member a-1 to be ready"
	if got, want := a.String(), `blockedBy="member a-1 to be ready"`; !strings.Contains(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := (Action{Kind: PublishStatus, Key: "status/ns/a"}).String(); got != "PublishStatus status/ns/a" {
		t.Errorf("no status: got %q", got)
	}
}

// Two members not ready, each within its grace period: the fleet is stepped again when the
// sooner of the two periods ends, whichever member comes first.
func TestRequeueIsTheSoonestWait(t *testing.T) {
	for _, since := range [][2]time.Duration{{10 * time.Second, 40 * time.Second}, {40 * time.Second, 10 * time.Second}} {
		r := newRun(t, v1alpha1.ProfilePersistentFleet, 3, map[string]int{})
		r.settle()
		ms := r.w.members()
		setPodReady(ms[0], false, r.w.now.Add(-since[0]))
		setPodReady(ms[1], false, r.w.now.Add(-since[1]))
		v := events.Normalize(worldNS, worldName, r.w.observe())
		var after []time.Duration
		for _, a := range New().Step(&v).Actions {
			if a.Kind == Requeue {
				after = append(after, a.After)
			}
		}
		if want := worldGrace - max(since[0], since[1]); len(after) != 1 || after[0] != want {
			t.Errorf("%s and %s not ready, grace %s: requeues %v, want one after %s", since[0], since[1], worldGrace, after, want)
		}
	}
}

// A converged fleet given a new image at the same size: the workload's write carries the
// spec's premise only, not a scale-in's (every member ready, the last change rolled out), and the
// Event of a growth names its trigger.
func TestSameSizeApplyIsNoScaleIn(t *testing.T) {
	r := newRun(t, v1alpha1.ProfilePersistentFleet, 3, map[string]int{})
	r.settle()
	r.w.fleet.Spec.Image = "registry.example/celld:next"
	r.w.fleet.Generation++
	v := events.Normalize(worldNS, worldName, r.w.observe())
	d := New().Step(&v)
	applied := false
	for _, a := range d.Actions {
		if a.Kind == Apply && a.Ref.Kind == "StatefulSet" {
			applied = true
			if p := a.Premise; p == nil || p.RolledOut || len(p.Ready) != 0 || len(p.Nodes) != 0 {
				t.Errorf("same-size apply %s: premise %+v, want the spec's only", a.Key, p)
			}
		}
	}
	if !applied {
		t.Fatalf("a new image: want the StatefulSet applied, got %s", d.Actions)
	}

	// A growth's Event names the trigger that started it.
	r.w.fleet.Spec.Image = "registry.example/celld:1.2"
	r.w.fleet.Spec.Members = 4
	r.w.fleet.Generation++
	v = events.Normalize(worldNS, worldName, r.w.observe())
	var said []string
	for _, a := range New().Step(&v).Actions {
		if a.Kind == RecordEvent {
			said = append(said, a.Message)
		}
	}
	if want := "Steady -> Growing (TargetAboveCurrent): 3 -> 4 members in one step"; !slices.Contains(said, want) {
		t.Errorf("a growth: Events %q, want %q", said, want)
	}
}
