package proptest

import (
	"fmt"
	"maps"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/proptest/harness"
)

// members counts a fleet's member Pods, terminating ones included.
func membersOf(w *harness.World, fleet string) int {
	n := 0
	for _, p := range w.C.Pods(harness.Namespace) {
		if p.Labels["app.kubernetes.io/instance"] == fleet {
			n++
		}
	}
	return n
}

// TestHibernation: hibernated, every member of a fleet stops at once (no workload left, the
// claims and the reservation kept), through an operator restart that changes nothing; a scale
// (an HPA's) is refused while it sleeps; woken, it comes back at its size on the same claims
// (by UID), Ready only once every member is; asleep again, it is deleted through the finalizer
// path. Each profile, every round judged by the contract's judges.
func TestHibernation(t *testing.T) {
	for _, base := range profiles {
		t.Run(fmt.Sprintf("%s-%s", base.Profile, base.Workload), func(t *testing.T) {
			w := harness.NewWorld(8, 1)
			must(t, w.CreateFleet(fleetSpec(base, "alpha", 3)))
			must(t, w.Converge())
			claims := claimsOf(w)

			must(t, w.SetHibernate("alpha", true))
			asleep := func(what string) {
				t.Helper()
				f := w.C.Fleet(harness.Namespace, "alpha")
				if f.Status.State != v1alpha1.StateHibernated {
					t.Fatalf("%s: state %q, want Hibernated", what, f.Status.State)
				}
				if w.C.StatefulSet(harness.Namespace, "alpha") != nil || w.C.Deployment(harness.Namespace, "alpha") != nil {
					t.Fatalf("%s: a workload is left", what)
				}
				if n := membersOf(w, "alpha"); n != 0 {
					t.Fatalf("%s: %d member Pods left", what, n)
				}
				if st, reason := condition(f, v1alpha1.ConditionReady); st != "False" || reason != "Hibernated" {
					t.Fatalf("%s: Ready=%s %s, want False Hibernated", what, st, reason)
				}
				if st, _ := condition(f, v1alpha1.ConditionHibernated); st != "True" {
					t.Fatalf("%s: Hibernated=%s, want True", what, st)
				}
				if f.Status.Members.Desired != 3 || f.Status.RecommendedMembers != nil {
					t.Fatalf("%s: members %+v, recommended %v; want desired 3 and no recommendation", what, f.Status.Members, f.Status.RecommendedMembers)
				}
				if got := claimsOf(w); !maps.Equal(got, claims) {
					t.Fatalf("%s: claims %v, want those kept %v", what, got, claims)
				}
			}
			must(t, w.Step(40))
			asleep("hibernated")
			if a, b := eventCount(w, "alpha", "Hibernating"), eventCount(w, "alpha", "Hibernated"); a != 1 || b != 1 {
				t.Errorf("Hibernating %d, Hibernated %d Events, want 1 each", a, b)
			}
			before := len(w.C.Writes())
			w.Restart()
			must(t, w.Step(10))
			asleep("after an operator restart")
			for _, r := range w.C.Writes()[before:] {
				if r.Action != "PublishStatus" {
					t.Errorf("a restart while asleep wrote %s %s", r.Action, r.Key)
				}
			}
			if err := w.Scale("alpha", 5); !apierrors.IsInvalid(err) {
				t.Fatalf("scale of a sleeping fleet: %v, want a refusal", err)
			}

			must(t, w.SetHibernate("alpha", false))
			must(t, w.Step(1))
			if f := w.C.Fleet(harness.Namespace, "alpha"); f.Status.State != v1alpha1.StateWaking {
				t.Fatalf("woken: state %q, want Waking", f.Status.State)
			} else if st, reason := condition(f, v1alpha1.ConditionReady); st != "False" || reason != "Waking" {
				t.Fatalf("waking: Ready=%s %s, want False Waking", st, reason)
			}
			must(t, w.Converge())
			f := w.C.Fleet(harness.Namespace, "alpha")
			if st, _ := condition(f, v1alpha1.ConditionReady); st != "True" || f.Status.State != v1alpha1.StateSteady || f.Status.Members.Ready != 3 {
				t.Fatalf("woken: state %s, Ready=%s, members %+v; want Steady, True, 3 ready", f.Status.State, st, f.Status.Members)
			}
			if got := claimsOf(w); !maps.Equal(got, claims) {
				t.Fatalf("woken: claims %v, want the same %v", got, claims)
			}
			if st, _ := condition(f, v1alpha1.ConditionHibernated); st != "" {
				t.Errorf("woken: a Hibernated condition is left (%s)", st)
			}
			if a, b := eventCount(w, "alpha", "Waking"), eventCount(w, "alpha", "Woken"); a != 1 || b != 1 {
				t.Errorf("Waking %d, Woken %d Events, want 1 each", a, b)
			}

			must(t, w.SetHibernate("alpha", true))
			must(t, w.Step(40))
			asleep("asleep again")
			must(t, w.Delete("alpha"))
			must(t, w.Converge())
			if w.C.Fleet(harness.Namespace, "alpha") != nil {
				t.Fatal("a fleet deleted while asleep is still there")
			}
		})
	}
}
