package proptest

import (
	"testing"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/proptest/harness"
)

// A PersistentFleet whose storage class does not exist is held (Degraded StorageClassMissing):
// a new one gets no workload and no claim, a running one keeps its workload as it is through a
// scale-up and loses no member or disk; every pass is judged by the hold judge, which refuses a
// workload write and a status that does not hold the fleet. Once the class exists, the fleet
// converges to what its spec asks.
func TestStorageClassMissingHoldsTheFleet(t *testing.T) {
	for _, running := range []bool{false, true} {
		name := "new"
		if running {
			name = "running"
		}
		t.Run(name, func(t *testing.T) {
			w := harness.NewWorld(8, 1)
			spec := fleetSpec(profiles[0], "alpha", 3)
			if running {
				must(t, w.CreateFleet(spec))
				must(t, w.Converge())
			}
			kept := claimsOf(w)
			must(t, w.C.DeleteStorageClass(harness.StorageClass))
			if running {
				must(t, w.Scale("alpha", 5))
			} else {
				must(t, w.CreateFleet(spec))
			}
			must(t, w.Step(30))
			f := w.C.Fleet(harness.Namespace, "alpha")
			if c := degraded(f); c == nil || c.Reason != "StorageClassMissing" {
				t.Errorf("Degraded %+v: want StorageClassMissing", c)
			}
			s := w.C.StatefulSet(harness.Namespace, "alpha")
			switch {
			case !running && s != nil:
				t.Errorf("a StatefulSet was created for a storage class that does not exist")
			case running && (s == nil || *s.Spec.Replicas != 3):
				t.Errorf("the running fleet was not held at 3 members: %v", s)
			}
			now := claimsOf(w)
			if len(now) != len(kept) {
				t.Errorf("claims %v while held; want %v", now, kept)
			}
			for c, uid := range kept {
				if now[c] != uid {
					t.Errorf("claim %s was deleted while the fleet was held", c)
				}
			}
			must(t, w.C.AddStorageClass(harness.StorageClass, false))
			must(t, w.Converge())
			want := int32(3)
			if running {
				want = 5
			}
			if f := w.C.Fleet(harness.Namespace, "alpha"); f.Status.State != v1alpha1.StateSteady || f.Status.Members.Ready != want {
				t.Errorf("once the class exists: %s with %d ready; want Steady with %d", f.Status.State, f.Status.Members.Ready, want)
			}
		})
	}
}
