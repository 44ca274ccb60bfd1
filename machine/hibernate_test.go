package machine

import (
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
)

// hibernation runs a PersistentFleet of three to Steady in the test world.
func hibernation(t *testing.T) *run {
	r := newRun(t, v1alpha1.ProfilePersistentFleet, 3, map[string]int{})
	for i := 0; i < 12; i++ {
		r.do(opTick, nil)
		r.do(opPass, nil)
	}
	if r.w.fleet.Status.State != v1alpha1.StateSteady || len(r.w.pods) != 3 {
		t.Fatalf("not Steady at 3: %s", r.shape())
	}
	return r
}

func (r *run) stepNow() Decision {
	v := events.Normalize(worldNS, worldName, r.w.observe())
	return r.m.Step(&v)
}

func budgetMark(w *world) string {
	for _, o := range w.owned {
		if m, ok := o.(metav1.Object); ok && m.GetName() == worldName {
			if v, ok := m.GetAnnotations()[kinds.AnnotationHibernated]; ok {
				return v
			}
		}
	}
	return ""
}

// TestHibernationStopsOnlyOnRequest: the step that starts the stop marks the budget, then
// deletes the workload, with the fleet's generation as premise; no other step stops it.
func TestHibernationStopsOnlyOnRequest(t *testing.T) {
	r := hibernation(t)
	for _, a := range r.stepNow().Actions {
		if a.Kind == StopWorkload {
			t.Fatalf("a fleet that does not ask to hibernate is stopped: %s", a)
		}
	}
	r.do(opHibernate, nil)
	d := r.stepNow()
	var kinds []string
	for _, a := range d.Actions {
		if a.Kind == Apply || a.Kind == StopWorkload {
			kinds = append(kinds, a.Key)
		}
		if a.Kind == StopWorkload && (a.Premise == nil || a.Premise.FleetGeneration != r.w.fleet.Generation || a.UID != r.w.sts.UID) {
			t.Errorf("stop without the fleet's generation and the workload's UID: %+v", a)
		}
	}
	if len(kinds) != 2 || kinds[0] != "apply/PodDisruptionBudget/a" || kinds[1] != "stop/ns/a/"+string(r.w.sts.UID) {
		t.Fatalf("hibernate: writes %v, want the budget's mark, then the stop", kinds)
	}
	if d.To != v1alpha1.StateHibernating {
		t.Errorf("hibernate: state %s, want Hibernating", d.To)
	}
}

// TestHibernatedOnlyOnceEveryMemberIsGone: while stopped members still terminate (and hold
// their disks) the fleet is Hibernating; Hibernated once none is left, recorded on the budget; a
// restarted operator then finds it Hibernated, writes nothing, and calls none of its disks
// unused.
func TestHibernatedOnlyOnceEveryMemberIsGone(t *testing.T) {
	r := hibernation(t)
	r.do(opHibernate, nil)
	r.do(opPass, nil)
	if len(r.w.pods) == 0 || r.w.sts != nil {
		t.Fatalf("after the stop: %s", r.shape())
	}
	if d := r.stepNow(); d.To != v1alpha1.StateHibernating || d.Status.State != v1alpha1.StateHibernating {
		t.Fatalf("members terminating: state %s, want Hibernating", d.To)
	}
	r.do(opTick, nil)
	r.do(opPass, nil)
	if len(r.w.pods) != 0 || r.w.fleet.Status.State != v1alpha1.StateHibernated || budgetMark(r.w) != kinds.HibernatedStopped {
		t.Fatalf("members gone: state %s, mark %q: %s", r.w.fleet.Status.State, budgetMark(r.w), r.shape())
	}
	r.m = New()
	d := r.stepNow()
	if d.From != v1alpha1.StateHibernated || d.To != v1alpha1.StateHibernated || mutations(d) != "" {
		t.Fatalf("restarted while asleep: %s -> %s, writes %q", d.From, d.To, mutations(d))
	}
	if dk := d.Status.Disks; dk != nil && len(dk.Unused) > 0 {
		t.Errorf("asleep: disks %v reported unused; the fleet wakes on them", dk.Unused)
	}
	for _, c := range d.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady && (c.Status != metav1.ConditionFalse || c.Reason != ReasonHibernated) {
			t.Errorf("asleep: Ready=%s %s, want False Hibernated", c.Status, c.Reason)
		}
	}
}

// TestWakingUntilEveryMemberIsReady: woken, the workload comes back at spec.members; the fleet
// is Waking, its budget still marked, until every member is ready, then Steady and unmarked.
func TestWakingUntilEveryMemberIsReady(t *testing.T) {
	r := hibernation(t)
	r.do(opHibernate, nil)
	for i := 0; i < 3; i++ {
		r.do(opPass, nil)
		r.do(opTick, nil)
	}
	r.do(opHibernate, nil)
	r.do(opPass, nil)
	if r.w.sts == nil || *r.w.sts.Spec.Replicas != 3 {
		t.Fatalf("woken: %s", r.shape())
	}
	for i := 0; i < 12 && len(r.w.pods) < 3; i++ {
		r.do(opTick, nil)
		r.do(opPass, nil)
		if r.w.fleet.Status.State != v1alpha1.StateWaking || budgetMark(r.w) == "" {
			t.Fatalf("%d of 3 members: state %s, mark %q, want Waking and marked", len(r.w.pods), r.w.fleet.Status.State, budgetMark(r.w))
		}
	}
	for i := 0; i < 4; i++ {
		r.do(opTick, nil)
		r.do(opPass, nil)
	}
	if r.w.fleet.Status.State != v1alpha1.StateSteady || budgetMark(r.w) != "" {
		t.Fatalf("every member ready: state %s, mark %q: %s", r.w.fleet.Status.State, budgetMark(r.w), r.shape())
	}
}

// TestHibernatingWaitsOnNoMemberComingBack: a member whose node is gone while another is not
// ready is a problem only a person ends on an awake fleet (Degraded MemberCannotComeBack); a
// fleet going to sleep stops them all and reports no such problem, and stops its workload.
func TestHibernatingWaitsOnNoMemberComingBack(t *testing.T) {
	r := hibernation(t)
	r.do(opCrash, queueDraw{&[]int{0}})
	gone := -1
	for i, n := range sortedKeys(r.w.nodes) {
		if p := r.w.pods["a-2"]; p != nil && p.Spec.NodeName == n {
			gone = i
		}
	}
	if gone < 0 {
		t.Fatalf("member a-2 on no node: %s", r.shape())
	}
	r.do(opNodeGone, queueDraw{&[]int{gone}})
	if c := hibCondition(r.stepNow().Status, v1alpha1.ConditionDegraded); c.Status != metav1.ConditionTrue || c.Reason != ReasonMemberLost {
		t.Fatalf("awake, a-2's node gone and a-0 not ready: Degraded %s %s %q, want True MemberCannotComeBack", c.Status, c.Reason, c.Message)
	}
	r.do(opHibernate, nil)
	d := r.stepNow()
	if c := hibCondition(d.Status, v1alpha1.ConditionDegraded); c.Status == metav1.ConditionTrue {
		t.Errorf("going to sleep: Degraded %s %q, want no problem a person must end", c.Reason, c.Message)
	}
	if c := hibCondition(d.Status, v1alpha1.ConditionProgressing); c.Reason == ReasonMemberLost {
		t.Errorf("going to sleep: Progressing %s %s %q", c.Status, c.Reason, c.Message)
	}
	stops := 0
	for _, a := range d.Actions {
		if a.Kind == StopWorkload {
			stops++
		}
	}
	if stops != 1 {
		t.Errorf("going to sleep with a member lost: %d stops of the workload, want 1", stops)
	}
}

// TestHibernationHeldByForeignDisks: another fleet's disk under this fleet's names holds the
// workload where it is; asked to sleep, the fleet keeps it running and says what holds it.
func TestHibernationHeldByForeignDisks(t *testing.T) {
	r := hibernation(t)
	r.do(opForeignDisk, nil)
	r.do(opHibernate, nil)
	d := r.stepNow()
	for _, a := range d.Actions {
		if a.Kind == StopWorkload {
			t.Fatalf("the workload of a held fleet is stopped: %s", a)
		}
	}
	if c := hibCondition(d.Status, v1alpha1.ConditionDegraded); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "data-a-9") {
		t.Errorf("held: Degraded %s %s %q, want True naming data-a-9", c.Status, c.Reason, c.Message)
	}
	if !strings.Contains(d.Status.BlockedBy, "data-a-9") {
		t.Errorf("held: blockedBy %q does not name data-a-9", d.Status.BlockedBy)
	}
}

func hibCondition(st v1alpha1.CelldFleetStatus, typ string) metav1.Condition {
	if c := apimeta.FindStatusCondition(st.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{Type: typ, Status: "absent"}
}
