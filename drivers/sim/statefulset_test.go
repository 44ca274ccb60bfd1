package sim

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// rolledOut is the contract's definition, read off the stored StatefulSet.
func stsRolledOut(s *appsv1.StatefulSet) bool {
	r := *s.Spec.Replicas
	return s.Status.ObservedGeneration == s.Generation && s.Status.Replicas == r && s.Status.UpdatedReplicas == r &&
		s.Status.ReadyReplicas == r && s.Status.CurrentRevision == s.Status.UpdateRevision
}

func TestStatefulSetCreatesOrdinalsOneAtATimeOnceThePreviousIsReady(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfilePersistentFleet)
	apply(t, c, statefulSet(f, 3, "celld:v1"))

	// Watch every moment: a Pod with ordinal i may exist only once 0..i-1 are ready.
	created := map[string]time.Time{}
	for step := 0; step < 100 && len(created) < 3 || readyCount(memberPods(c, f)) < 3; step++ {
		c.Settle()
		pods := memberPods(c, f)
		for i := 0; i < 3; i++ {
			name := fmt.Sprintf("alpha-%d", i)
			if _, ok := pods[name]; !ok {
				continue
			}
			if _, seen := created[name]; !seen {
				created[name] = c.Now()
			}
			for j := 0; j < i; j++ {
				prev := pods[fmt.Sprintf("alpha-%d", j)]
				if prev == nil || !podReady(prev) {
					t.Fatalf("at %s %s exists while alpha-%d is not ready", c.Now(), name, j)
				}
			}
		}
		c.Advance(5 * time.Second)
	}
	mustEqual(t, "ready members", readyCount(memberPods(c, f)), 3)
	if !created["alpha-0"].Before(created["alpha-1"]) || !created["alpha-1"].Before(created["alpha-2"]) {
		t.Fatalf("creation order %v", created)
	}
	// Each waited for its predecessor's recovery delay.
	if d := created["alpha-2"].Sub(created["alpha-0"]); d < 60*time.Second {
		t.Fatalf("alpha-2 created %s after alpha-0, want at least two recovery delays", d)
	}

	s := c.StatefulSet(ns, "alpha")
	if !stsRolledOut(s) {
		t.Fatalf("status %+v, generation %d: not rolled out", s.Status, s.Generation)
	}
	// One member per node, claims created from the template, labelled with its and the selector's labels.
	nodes := map[string]bool{}
	for _, p := range memberPods(c, f) {
		nodes[p.Spec.NodeName] = true
		mustEqual(t, p.Name+" revision", p.Labels[appsv1.StatefulSetRevisionLabel], s.Status.UpdateRevision)
	}
	mustEqual(t, "nodes used", len(nodes), 3)
	for i := 0; i < 3; i++ {
		pvc := c.PVC(ns, fmt.Sprintf("data-alpha-%d", i))
		if pvc == nil {
			t.Fatalf("claim data-alpha-%d missing", i)
		}
		mustEqual(t, "claim phase", string(pvc.Status.Phase), "Bound")
		mustEqual(t, "claim fleet label", pvc.Labels[kinds.LabelFleetUID], string(f.UID))
		mustEqual(t, "claim template label", pvc.Labels[kinds.LabelComponent], "disk")
		if len(pvc.Finalizers) != 1 || pvc.Finalizers[0] != PVCProtectionFinalizer {
			t.Fatalf("claim finalizers %v", pvc.Finalizers)
		}
	}
}

func TestStatefulSetScalesDownHighestFirstOneAtATimeAndRetainsClaims(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfilePersistentFleet)
	apply(t, c, statefulSet(f, 3, "celld:v1"))
	runFor(c, 3*time.Minute)
	mustEqual(t, "ready", readyCount(memberPods(c, f)), 3)

	apply(t, c, statefulSet(f, 1, "celld:v1"))
	c.Tick()
	pods := memberPods(c, f)
	if !terminating(pods["alpha-2"]) || terminating(pods["alpha-1"]) {
		t.Fatalf("after one sync: alpha-2 terminating=%t alpha-1 terminating=%t, want only alpha-2", terminating(pods["alpha-2"]), terminating(pods["alpha-1"]))
	}
	s := c.StatefulSet(ns, "alpha")
	mustEqual(t, "status.replicas while alpha-2 terminates", s.Status.Replicas, int32(3))
	if stsRolledOut(s) {
		t.Fatal("rolled out while a member terminates")
	}

	// alpha-1 is untouched until alpha-2 is gone (30s grace).
	for c.Pod(ns, "alpha-2") != nil {
		if p := c.Pod(ns, "alpha-1"); terminating(p) {
			t.Fatalf("alpha-1 terminating at %s while alpha-2 still exists", c.Now())
		}
		c.Advance(5 * time.Second)
		c.Settle()
	}
	runFor(c, 2*time.Minute)
	mustEqual(t, "members", fmt.Sprint(names(memberPods(c, f))), "[alpha-0]")
	if !stsRolledOut(c.StatefulSet(ns, "alpha")) {
		t.Fatalf("not rolled out at 1: %+v", c.StatefulSet(ns, "alpha").Status)
	}
	for i := 0; i < 3; i++ {
		if pvc := c.PVC(ns, fmt.Sprintf("data-alpha-%d", i)); pvc == nil || pvc.DeletionTimestamp != nil {
			t.Fatalf("claim data-alpha-%d not retained: %v", i, pvc)
		}
	}

	// Growing back reuses the retained claims: same UIDs.
	before := c.PVC(ns, "data-alpha-2").UID
	apply(t, c, statefulSet(f, 3, "celld:v1"))
	runFor(c, 3*time.Minute)
	mustEqual(t, "ready after growing back", readyCount(memberPods(c, f)), 3)
	mustEqual(t, "claim reused", c.PVC(ns, "data-alpha-2").UID, before)
}

// TestBrokenRolloutTrap reproduces kubernetes#67250: with OrderedReady, a member that is not
// ready on an old revision blocks the rolling update forever; only deleting it (what Healing
// does) lets the controller recreate it on the new revision.
func TestBrokenRolloutTrap(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfilePersistentFleet)
	apply(t, c, statefulSet(f, 3, "celld:v1"))
	runFor(c, 3*time.Minute)
	v1 := c.StatefulSet(ns, "alpha").Status.UpdateRevision

	c.BreakImage("celld:bad")
	apply(t, c, statefulSet(f, 3, "celld:bad"))
	runFor(c, 10*time.Minute)
	bad := c.StatefulSet(ns, "alpha").Status.UpdateRevision
	pods := memberPods(c, f)
	mustEqual(t, "alpha-2 revision", revision(pods["alpha-2"]), bad)
	mustEqual(t, "alpha-2 ready", podReady(pods["alpha-2"]), false)
	mustEqual(t, "alpha-1 revision", revision(pods["alpha-1"]), v1)

	// The fix: a good image. The not-ready alpha-2 is now on an old revision and blocks.
	apply(t, c, statefulSet(f, 3, "celld:v3"))
	runFor(c, time.Hour)
	s := c.StatefulSet(ns, "alpha")
	v3 := s.Status.UpdateRevision
	pods = memberPods(c, f)
	mustEqual(t, "alpha-2 still on the broken revision", revision(pods["alpha-2"]), bad)
	mustEqual(t, "alpha-2 terminating", terminating(pods["alpha-2"]), false)
	mustEqual(t, "updated replicas", s.Status.UpdatedReplicas, int32(0))
	mustEqual(t, "current revision", s.Status.CurrentRevision, v1)

	p := pods["alpha-2"]
	must(t, c.Do(machine.Action{Kind: machine.DeletePod, Key: "heal/alpha-2", Ref: kinds.Ref{Namespace: ns, Name: p.Name}, UID: p.UID,
		ResourceVersion: p.ResourceVersion, Reason: "StuckOnOldRevision"}))
	runFor(c, 10*time.Minute)
	s = c.StatefulSet(ns, "alpha")
	if !stsRolledOut(s) || s.Status.UpdateRevision != v3 {
		t.Fatalf("after healing: status %+v, want rolled out at %s", s.Status, v3)
	}
}

func TestParallelStatefulSetReplacesNotReadyOldRevisionItself(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfilePersistentFleet)
	sts := func(image string) *appsv1.StatefulSet {
		s := statefulSet(f, 3, image)
		s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
		return s
	}
	apply(t, c, sts("celld:v1"))
	runFor(c, time.Minute)
	c.BreakImage("celld:bad")
	apply(t, c, sts("celld:bad"))
	runFor(c, 5*time.Minute)
	apply(t, c, sts("celld:v3"))
	runFor(c, 10*time.Minute)
	if s := c.StatefulSet(ns, "alpha"); !stsRolledOut(s) {
		t.Fatalf("Parallel rollout stuck: %+v", s.Status)
	}
}

func TestStatefulSetStatusCountsTerminatingAndNotReadyMembers(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	apply(t, c, statefulSet(f, 3, "celld:v1"))
	runFor(c, 3*time.Minute)
	must(t, c.CrashMember(ns, "alpha-1"))
	c.Settle()
	s := c.StatefulSet(ns, "alpha")
	got := []int32{s.Status.Replicas, s.Status.ReadyReplicas, s.Status.UpdatedReplicas, s.Status.CurrentReplicas}
	if !reflect.DeepEqual(got, []int32{3, 2, 3, 3}) {
		t.Fatalf("replicas, ready, updated, current = %v, want [3 2 3 3]", got)
	}
	runFor(c, 30*time.Second)
	mustEqual(t, "ready after recovery", c.StatefulSet(ns, "alpha").Status.ReadyReplicas, int32(3))
	mustEqual(t, "restarts", c.Pod(ns, "alpha-1").Status.ContainerStatuses[0].RestartCount, int32(1))
}

// TestStatefulSetCreatesNoPodOverAClaimBeingDeleted: as the real controller ("pvc ... is being
// deleted"), a member whose claim is being deleted is not created again until the claim is gone;
// then it starts on a new claim. A Pod made over the old claim would keep it in use forever.
func TestStatefulSetCreatesNoPodOverAClaimBeingDeleted(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfilePersistentFleet)
	apply(t, c, statefulSet(f, 1, "celld:v1"))
	runFor(c, 2*time.Minute)
	// Another controller's finalizer (a backup tool's) keeps the claim after its Pod is gone.
	const hold = "backup.example.com/hold"
	held := c.claim(ns, "data-alpha-0").DeepCopy()
	held.Finalizers = append(held.Finalizers, hold)
	if !c.put(held) {
		t.Fatal("could not add a finalizer to the claim")
	}
	old := c.PVC(ns, "data-alpha-0")
	must(t, c.Delete(KindPVC, ns, old.Name))
	must(t, c.Delete(KindPod, ns, "alpha-0"))
	runFor(c, 5*time.Minute)
	if pvc := c.PVC(ns, old.Name); pvc == nil || pvc.UID != old.UID || pvc.DeletionTimestamp == nil {
		t.Fatalf("claim with a finalizer of another: %v, want kept, being deleted", pvc)
	}
	if p := c.Pod(ns, "alpha-0"); p != nil {
		t.Fatalf("a new alpha-0 (%s) was created over claim %s being deleted", p.UID, old.UID)
	}
	released := c.claim(ns, old.Name).DeepCopy()
	removeFinalizer(released, hold)
	if !c.put(released) {
		t.Fatal("could not remove the finalizer")
	}
	runFor(c, 2*time.Minute)
	pvc, p := c.PVC(ns, old.Name), c.Pod(ns, "alpha-0")
	if pvc == nil || pvc.UID == old.UID || p == nil || !podReady(p) {
		t.Fatalf("after the old claim went: claim %v, member %v; want a new claim and a ready member", pvc, p)
	}
}
