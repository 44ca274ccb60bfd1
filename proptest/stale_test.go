package proptest

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/proptest/harness"
)

// A cache that missed a change must not move a workload by more than the one step the decision
// meant: the driver confirms the fleet's spec and the workload as decided on, refuses the write
// when either moved, and the operator decides again once its cache catches up. Both cases were
// found by long fuzz runs, where a dropped event let the operator create a Deployment at a size
// the user had already scaled away from, or "create" one that existed.
func TestStaleCacheMovesNoWorkloadPastOneStep(t *testing.T) {
	spec := harness.FleetSpec{Name: "alpha", Profile: v1alpha1.ProfileBucket, Members: 5, Bucket: "b", Workload: v1alpha1.WorkloadDeployment}
	for _, tc := range []struct {
		name string
		// stale plays the dropped events: the world is left with the fleet at 1 member and an
		// operator whose cache has not seen everything.
		stale func(t *testing.T, w *harness.World)
	}{
		{"the user's scale-in missed before the workload exists", func(t *testing.T, w *harness.World) {
			w.Op.Feed(w.C.Drain())
			must(t, w.Scale("alpha", 1))
			w.C.Drain() // the watch drops the update: the cache still says 5
		}},
		{"the operator's own creation missed", func(t *testing.T, w *harness.World) {
			w.Op.Feed(w.C.Drain())
			must(t, w.Check.After(w.Op.Sync(w.C))) // creates the Deployment at 5
			if d := w.C.Deployment(harness.Namespace, "alpha"); d == nil || *d.Spec.Replicas != 5 {
				t.Fatalf("the first sync did not create the Deployment at 5: %v", d)
			}
			w.C.Drain() // the watch drops the creation: the cache has no Deployment
			must(t, w.Scale("alpha", 1))
			w.Op.Feed(w.C.Drain())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := harness.NewWorld(8, 1)
			must(t, w.CreateFleet(spec))
			tc.stale(t, w)
			before := w.C.Deployment(harness.Namespace, "alpha")
			if err := w.Check.After(w.Op.Sync(w.C)); err != nil {
				t.Fatalf("the sync on the stale cache: %v", err)
			}
			after := w.C.Deployment(harness.Namespace, "alpha")
			if (before == nil) != (after == nil) || (before != nil && *before.Spec.Replicas != *after.Spec.Replicas) {
				t.Fatalf("the sync on the stale cache wrote the Deployment: %v -> %v", replicas(before), replicas(after))
			}
			w.Resync()
			if err := w.Converge(); err != nil {
				t.Fatal(err)
			}
			if d := w.C.Deployment(harness.Namespace, "alpha"); d == nil || *d.Spec.Replicas != 1 {
				t.Fatalf("converged with the Deployment at %v, want 1", replicas(d))
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func replicas(d *appsv1.Deployment) any {
	if d == nil {
		return "none"
	}
	return *d.Spec.Replicas
}
