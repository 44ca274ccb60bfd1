package e2e

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// memberRevisions names each member Pod not being deleted with its controller-revision-hash
// label, as the StatefulSet controller set it, and its UID.
func (f *fixture) memberRevisions(fl *v1alpha1.CelldFleet) (map[string]string, map[string]types.UID) {
	f.t.Helper()
	revs, uids := map[string]string{}, map[string]types.UID{}
	for _, p := range f.members(fl) {
		if p.DeletionTimestamp == nil {
			revs[p.Name] = p.Labels[appsv1.StatefulSetRevisionLabel]
			uids[p.Name] = p.UID
		}
	}
	return revs, uids
}

func membersOn(revs map[string]string, rev string) []string {
	var out []string
	for name, r := range revs {
		if r == rev {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// eventsOf counts the fleet's Events of a reason.
func (f *fixture) eventsOf(name, reason string) int {
	f.t.Helper()
	l, err := suite.kube.CoreV1().Events(f.ns).List(f.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		f.t.Fatalf("list events: %v", err)
	}
	n := 0
	for _, e := range l.Items {
		if e.Reason == reason && e.InvolvedObject.Kind == "CelldFleet" {
			n++
		}
	}
	return n
}

// waitOneAway polls until done holds, failing when two members of the fleet are away at once (not
// ready, being deleted, or missing from the StatefulSet's size): a rollout takes one at a time.
func (f *fixture) waitOneAway(fl *v1alpha1.CelldFleet, what string, done func() bool) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(f.ctx, poll, converge, true, func(ctx context.Context) (bool, error) {
		s := f.statefulSet(fl.Name)
		away := int(*s.Spec.Replicas)
		for _, p := range f.members(fl) {
			if p.DeletionTimestamp == nil && podReady(&p) {
				away--
			}
		}
		if away > 1 {
			revs, _ := f.memberRevisions(fl)
			f.t.Fatalf("%s: %d members away at once: %v", what, away, revs)
		}
		return done(), nil
	})
	if err != nil {
		revs, _ := f.memberRevisions(fl)
		f.t.Fatalf("%s: not within %s: members %v, StatefulSet status %+v", what, converge, revs, f.statefulSet(fl.Name).Status)
	}
}

// TestStagedRollout: a PersistentFleet of three with spec.rollout.canary 1 takes a new image on
// its highest ordinal only and holds there: judged from the API server (the Pods' revision
// labels, the StatefulSet's partition and status), through an operator restart. Approved with
// kubectl celld rollout approve, the other two follow one at a time; the next change holds
// again; reverted while held, every member runs the previous template.
func TestStagedRollout(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.startOperator()
	fl := f.newFleet("canary", v1alpha1.ProfilePersistentFleet, 3)
	fl.Spec.Rollout = &v1alpha1.RolloutSpec{Canary: 1}
	fl = f.create(fl)
	f.waitConverged(fl.Name)
	v1 := f.statefulSet(fl.Name).Status.CurrentRevision

	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Image = image + "-v2" })
	f.waitFleet(fl.Name, converge, "rollout held", func(fl *v1alpha1.CelldFleet) bool {
		return fl.Status.Rollout != nil && fl.Status.Rollout.Held
	})
	_, before := f.memberRevisions(fl)
	checkHeld := func(what string) string {
		t.Helper()
		s := f.statefulSet(fl.Name)
		v2 := s.Status.UpdateRevision
		revs, uids := f.memberRevisions(fl)
		if got := membersOn(revs, v2); strings.Join(got, ",") != "canary-2" || v2 == v1 {
			t.Fatalf("%s: members on the new revision %s: %v, want only canary-2 (%v)", what, v2, got, revs)
		}
		if got := membersOn(revs, v1); strings.Join(got, ",") != "canary-0,canary-1" {
			t.Fatalf("%s: members on the old revision %s: %v, want canary-0 and canary-1", what, v1, got)
		}
		for _, n := range []string{"canary-0", "canary-1"} {
			if uids[n] != before[n] {
				t.Fatalf("%s: %s was replaced while the rollout held", what, n)
			}
		}
		if p := s.Spec.UpdateStrategy.RollingUpdate; p == nil || p.Partition == nil || *p.Partition != 2 {
			t.Fatalf("%s: rollingUpdate %+v, want partition 2", what, p)
		}
		if s.Status.CurrentRevision != v1 || s.Status.UpdatedReplicas != 1 {
			t.Fatalf("%s: StatefulSet status %+v, want current revision %s and 1 updated", what, s.Status, v1)
		}
		got, err := f.fleets().Get(f.ctx, fl.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r := got.Status.Rollout; r == nil || !r.Held || r.Revision != v2 || r.Updated != 1 || r.Total != 3 {
			t.Fatalf("%s: status.rollout %+v, want held on %s, 1 of 3", what, r, v2)
		}
		if c := condition(got, v1alpha1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != "RolloutHeld" {
			t.Fatalf("%s: Ready %s %s, want False RolloutHeld", what, c.Status, c.Reason)
		}
		return v2
	}
	v2 := checkHeld("held")
	// It holds: nothing moves on its own.
	time.Sleep(5 * time.Second)
	checkHeld("held, 5s later")
	if n := f.eventsOf(fl.Name, "RolloutHeld"); n != 1 {
		t.Errorf("%d RolloutHeld Events, want 1", n)
	}
	out, stderr, err := f.kubectlCelld("status", fl.Name, "-n", f.ns)
	if err != nil || !strings.Contains(out, "Rollout:      HELD: revision "+v2+" on 1 of 3 members (canary 1)") {
		t.Errorf("kubectl celld status: %v %s\n%s", err, stderr, out)
	}

	op.stop(t)
	f.startOperator()
	time.Sleep(5 * time.Second)
	checkHeld("held, after an operator restart")

	out, stderr, err = f.kubectlCelld("rollout", "approve", fl.Name, "-n", f.ns)
	if err != nil || !strings.Contains(out, "rollout of revision "+v2+" approved") {
		t.Fatalf("kubectl celld rollout approve: %v %s\n%s", err, stderr, out)
	}
	f.waitOneAway(fl, "approved", func() bool {
		revs, _ := f.memberRevisions(fl)
		return len(membersOn(revs, v2)) == 3
	})
	got := f.waitConverged(fl.Name)
	if got.Status.Rollout != nil {
		t.Errorf("approved and complete: status.rollout %+v, want none", got.Status.Rollout)
	}
	if s := f.statefulSet(fl.Name); s.Status.CurrentRevision != v2 || s.Status.UpdatedReplicas != 3 {
		t.Errorf("approved: StatefulSet status %+v, want every member on %s", s.Status, v2)
	}

	// The approval named v2: a third image is a new revision, and holds again.
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Image = image + "-v3" })
	f.waitFleet(fl.Name, converge, "the next rollout held", func(fl *v1alpha1.CelldFleet) bool {
		return fl.Status.Rollout != nil && fl.Status.Rollout.Held && fl.Status.Rollout.Revision != v2
	})
	revs, _ := f.memberRevisions(fl)
	if got := membersOn(revs, v2); strings.Join(got, ",") != "canary-0,canary-1" {
		t.Fatalf("the next change: members still on %s: %v, want canary-0 and canary-1", v2, got)
	}

	// Reverted while held: the canary goes back, and every member runs v2's template.
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Image = image + "-v2" })
	f.waitOneAway(fl, "reverted", func() bool {
		revs, _ := f.memberRevisions(fl)
		return len(membersOn(revs, v2)) == 3
	})
	f.waitConverged(fl.Name)
	for _, p := range f.members(fl) {
		if img := p.Spec.Containers[0].Image; img != image+"-v2" {
			t.Errorf("reverted: %s runs %s, want %s", p.Name, img, image+"-v2")
		}
	}
}

// TestStagedRolloutRefusedOnDeployment: a Bucket fleet on its default Deployment has no
// partition to hold a rollout at: admission refuses spec.rollout and says which workload to
// choose; a canary out of bounds is refused naming the field.
func TestStagedRolloutRefusedOnDeployment(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fl := f.newFleet("staged", v1alpha1.ProfileBucket, 2)
	fl.Spec.Rollout = &v1alpha1.RolloutSpec{Canary: 1}
	_, err := f.fleets().Create(f.ctx, fl, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.rollout needs a StatefulSet") || !strings.Contains(err.Error(), "spec.workload OrderedStatefulSet") {
		t.Fatalf("a Deployment fleet with spec.rollout: %v, want a refusal naming spec.workload OrderedStatefulSet", err)
	}
	fl = f.newFleet("staged", v1alpha1.ProfilePersistentFleet, 2)
	fl.Spec.Rollout = &v1alpha1.RolloutSpec{Canary: 0}
	if _, err := f.fleets().Create(f.ctx, fl, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "spec.rollout.canary") {
		t.Fatalf("canary 0: %v, want a refusal naming spec.rollout.canary", err)
	}
	fl = f.newFleet("staged", v1alpha1.ProfileBucket, 2)
	fl.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	fl.Spec.Rollout = &v1alpha1.RolloutSpec{Canary: 1}
	if _, err := f.fleets().Create(f.ctx, fl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a Bucket fleet on an OrderedStatefulSet with spec.rollout: %v", err)
	}
	_ = f.fleets().Delete(f.ctx, fl.Name, metav1.DeleteOptions{})
}
