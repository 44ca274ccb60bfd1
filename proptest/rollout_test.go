package proptest

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/proptest/harness"
)

// revisions names each member Pod of a fleet (not terminating) with its controller revision, as
// the StatefulSet controller labelled it.
func revisions(w *harness.World, fleet string) map[string]string {
	out := map[string]string{}
	for _, p := range w.C.Pods(harness.Namespace) {
		if p.Labels["app.kubernetes.io/instance"] == fleet && p.DeletionTimestamp == nil {
			out[p.Name] = p.Labels[appsv1.StatefulSetRevisionLabel]
		}
	}
	return out
}

// onRevision lists, sorted, the members on a revision.
func onRevision(revs map[string]string, rev string) []string {
	var out []string
	for name, r := range revs {
		if r == rev {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// stepOneAway runs rounds one at a time and fails when two members of the fleet are away at
// once (missing from its size, not ready or terminating): a rollout, held, approved or
// reverted, takes one member at a time.
func stepOneAway(t *testing.T, w *harness.World, fleet string, rounds int) {
	t.Helper()
	for range rounds {
		must(t, w.Step(1))
		s := w.C.StatefulSet(harness.Namespace, fleet)
		if s == nil {
			t.Fatalf("StatefulSet %s gone", fleet)
		}
		away := int(*s.Spec.Replicas)
		for _, p := range w.C.Pods(harness.Namespace) {
			if p.Labels["app.kubernetes.io/instance"] == fleet && p.DeletionTimestamp == nil && podReady(p) {
				away--
			}
		}
		if away > 1 {
			t.Fatalf("%d members of %s away at once at %s: %v", away, fleet, w.C.Now().Format("15:04:05"), revisions(w, fleet))
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func eventCount(w *harness.World, fleet, reason string) int {
	n := 0
	for _, e := range w.C.Events() {
		if e.Name == fleet && e.Reason == reason {
			n++
		}
	}
	return n
}

func condition(f *v1alpha1.CelldFleet, typ string) (status, reason string) {
	for _, c := range f.Status.Conditions {
		if c.Type == typ {
			return string(c.Status), c.Reason
		}
	}
	return "", ""
}

// TestStagedRollout: with spec.rollout.canary 1, a new image reaches the highest ordinal only and
// holds, through an operator restart, saying so in status (held, its revision, Ready=False
// RolloutHeld) and in one Event; approved, the rest follow one at a time; the next change holds
// again (the approval named the earlier revision); reverted while held, the canary goes back
// and every member runs the previous template. Judged from the Pods' revision labels and the
// StatefulSet, with every round judged by the contract's judges.
func TestStagedRollout(t *testing.T) {
	for _, base := range profiles {
		if base.Profile != v1alpha1.ProfilePersistentFleet && base.Workload != v1alpha1.WorkloadOrderedStatefulSet {
			continue
		}
		t.Run(fmt.Sprintf("%s-%s", base.Profile, base.Workload), func(t *testing.T) {
			w := harness.NewWorld(8, 1)
			must(t, w.CreateFleet(fleetSpec(base, "alpha", 4)))
			must(t, w.Converge())
			must(t, w.SetCanary("alpha", 1))
			must(t, w.Converge())
			v1 := w.C.StatefulSet(harness.Namespace, "alpha").Status.CurrentRevision

			must(t, w.SetImage("alpha", "celld:v2"))
			stepOneAway(t, w, "alpha", 60)
			held := func(what string) string {
				t.Helper()
				s := w.C.StatefulSet(harness.Namespace, "alpha")
				rev := s.Status.UpdateRevision
				revs := revisions(w, "alpha")
				if got := onRevision(revs, rev); !slices.Equal(got, []string{"alpha-3"}) || rev == v1 {
					t.Fatalf("%s: members on the new revision %s: %v, want [alpha-3] (%v)", what, rev, got, revs)
				}
				if got := onRevision(revs, v1); len(got) != 3 {
					t.Fatalf("%s: members on the old revision %s: %v, want 3", what, v1, got)
				}
				if p := s.Spec.UpdateStrategy.RollingUpdate.Partition; p == nil || *p != 3 {
					t.Fatalf("%s: partition %v, want 3", what, p)
				}
				f := w.C.Fleet(harness.Namespace, "alpha")
				if r := f.Status.Rollout; r == nil || !r.Held || r.Revision != rev || r.Updated != 1 || r.Total != 4 {
					t.Fatalf("%s: status.rollout %+v, want held on revision %s, 1 of 4", what, r, rev)
				}
				if st, reason := condition(f, v1alpha1.ConditionReady); st != "False" || reason != "RolloutHeld" {
					t.Fatalf("%s: Ready=%s %s, want False RolloutHeld", what, st, reason)
				}
				if st, reason := condition(f, v1alpha1.ConditionProgressing); st != "False" || reason != "RolloutHeld" {
					t.Fatalf("%s: Progressing=%s %s, want False RolloutHeld", what, st, reason)
				}
				return rev
			}
			v2 := held("held")
			if n := eventCount(w, "alpha", "RolloutHeld"); n != 1 {
				t.Errorf("%d RolloutHeld Events, want 1", n)
			}
			w.Restart()
			stepOneAway(t, w, "alpha", 30)
			held("held, after an operator restart")
			if n := eventCount(w, "alpha", "RolloutHeld"); n != 1 {
				t.Errorf("%d RolloutHeld Events after a restart, want 1", n)
			}

			approved, err := w.ApproveRollout("alpha")
			must(t, err)
			if !approved {
				t.Fatal("no held rollout to approve")
			}
			stepOneAway(t, w, "alpha", 80)
			must(t, w.Converge())
			if got := onRevision(revisions(w, "alpha"), v2); len(got) != 4 {
				t.Fatalf("approved: members on %s: %v, want all 4", v2, got)
			}
			if f := w.C.Fleet(harness.Namespace, "alpha"); f.Status.Rollout != nil {
				t.Errorf("approved and complete: status.rollout %+v, want none", f.Status.Rollout)
			}
			if a, c := eventCount(w, "alpha", "RolloutApproved"), eventCount(w, "alpha", "RolloutComplete"); a != 1 || c != 1 {
				t.Errorf("RolloutApproved %d, RolloutComplete %d Events, want 1 each", a, c)
			}

			// The approval names v2: the next change holds again.
			must(t, w.SetImage("alpha", "celld:v3"))
			stepOneAway(t, w, "alpha", 60)
			s := w.C.StatefulSet(harness.Namespace, "alpha")
			if got := onRevision(revisions(w, "alpha"), s.Status.UpdateRevision); !slices.Equal(got, []string{"alpha-3"}) {
				t.Fatalf("the next change: members on %s: %v, want [alpha-3]", s.Status.UpdateRevision, got)
			}

			// Reverted while held: the canary goes back, one at a time, and nothing holds.
			must(t, w.SetImage("alpha", "celld:v2"))
			stepOneAway(t, w, "alpha", 60)
			if got := onRevision(revisions(w, "alpha"), v2); len(got) != 4 {
				t.Fatalf("reverted: members on %s: %v, want all 4 (%v)", v2, got, revisions(w, "alpha"))
			}
			must(t, w.Converge())
			if f := w.C.Fleet(harness.Namespace, "alpha"); f.Status.Rollout != nil {
				t.Errorf("reverted: status.rollout %+v, want none", f.Status.Rollout)
			}
		})
	}
}

// TestStagedRolloutScales: while a rollout is held, a growth's new members are above the
// partition and start on the new template (the canaries stay where they are, none goes back),
// and a scale-in takes the top member away first, then the partition follows the size down so
// the canary count stays. Both as the contract allows: growth in one step, scale-in one member
// once the held rollout is settled at its partition.
func TestStagedRolloutScales(t *testing.T) {
	w := harness.NewWorld(8, 1)
	must(t, w.CreateFleet(fleetSpec(profiles[0], "alpha", 3)))
	must(t, w.SetCanary("alpha", 1))
	must(t, w.Converge())
	v1 := w.C.StatefulSet(harness.Namespace, "alpha").Status.CurrentRevision
	must(t, w.SetImage("alpha", "celld:v2"))
	stepOneAway(t, w, "alpha", 60)
	v2 := w.C.StatefulSet(harness.Namespace, "alpha").Status.UpdateRevision

	must(t, w.Scale("alpha", 5))
	must(t, w.Step(60)) // new members are away until ready: growth reaches its size in one step
	revs := revisions(w, "alpha")
	if got := onRevision(revs, v2); !slices.Equal(got, []string{"alpha-2", "alpha-3", "alpha-4"}) {
		t.Fatalf("grown while held: members on the new revision: %v, want alpha-2..4 (%v)", got, revs)
	}
	if got := onRevision(revs, v1); !slices.Equal(got, []string{"alpha-0", "alpha-1"}) {
		t.Fatalf("grown while held: members on the old revision: %v, want alpha-0, alpha-1", got)
	}

	must(t, w.Scale("alpha", 1))
	stepOneAway(t, w, "alpha", 200)
	s := w.C.StatefulSet(harness.Namespace, "alpha")
	if *s.Spec.Replicas != 1 {
		t.Fatalf("scaled in while held: replicas %d, want 1", *s.Spec.Replicas)
	}
	if p := s.Spec.UpdateStrategy.RollingUpdate.Partition; p == nil || *p != 0 {
		t.Fatalf("one member, canary 1: partition %v, want 0", p)
	}
	if got := onRevision(revisions(w, "alpha"), v2); !slices.Equal(got, []string{"alpha-0"}) {
		t.Fatalf("scaled in to one member: on the new revision %v, want [alpha-0]", got)
	}
}

// TestStagedRolloutCanaryCount: a canary of two updates the two highest ordinals and holds.
func TestStagedRolloutCanaryCount(t *testing.T) {
	w := harness.NewWorld(8, 1)
	must(t, w.CreateFleet(fleetSpec(profiles[2], "alpha", 4)))
	must(t, w.SetCanary("alpha", 2))
	must(t, w.Converge())
	must(t, w.SetImage("alpha", "celld:v2"))
	stepOneAway(t, w, "alpha", 80)
	s := w.C.StatefulSet(harness.Namespace, "alpha")
	if got := onRevision(revisions(w, "alpha"), s.Status.UpdateRevision); !slices.Equal(got, []string{"alpha-2", "alpha-3"}) {
		t.Fatalf("canary 2: members on the new revision: %v, want alpha-2 and alpha-3", got)
	}
	if p := s.Spec.UpdateStrategy.RollingUpdate.Partition; p == nil || *p != 2 {
		t.Fatalf("canary 2 of 4: partition %v, want 2", p)
	}
}
