package proptest

import (
	"fmt"
	"strings"
	"testing"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/proptest/harness"
	"github.com/celld/celld-operator/render"
)

// An input a fleet names that does not exist (its storage class, ServiceAccount or
// PriorityClass) holds the fleet, with the Degraded reason that names it: a new fleet gets no
// workload and no claim, a running one keeps its workload as it is through a scale-up and loses
// no member or disk; every pass is judged by the hold judge, which refuses a workload write and a
// status that does not hold the fleet. Once the input exists, the fleet converges to its spec.
func TestMissingInputHoldsTheFleet(t *testing.T) {
	type input struct {
		reason string
		name   func(f *v1alpha1.CelldFleet)
		remove func(w *harness.World) error
		add    func(w *harness.World) error
	}
	const account, class = "celld-members", "celld-high"
	inputs := []input{
		{"StorageClassMissing", func(*v1alpha1.CelldFleet) {},
			func(w *harness.World) error { return w.C.DeleteStorageClass(harness.StorageClass) },
			func(w *harness.World) error {
				if w.C.Get(sim.KindStorageClass, "", harness.StorageClass) != nil {
					return nil
				}
				return w.C.AddStorageClass(harness.StorageClass, false)
			}},
		{"ServiceAccountMissing", func(f *v1alpha1.CelldFleet) { f.Spec.ServiceAccountName = account },
			func(w *harness.World) error { w.C.DeleteServiceAccount(harness.Namespace, account); return nil },
			func(w *harness.World) error { w.C.AddServiceAccount(harness.Namespace, account); return nil }},
		{"PriorityClassMissing", func(f *v1alpha1.CelldFleet) { f.Spec.Pod.PriorityClassName = class },
			func(w *harness.World) error {
				if w.C.Get(kinds.PriorityClass, "", class) == nil {
					return nil
				}
				return w.C.Delete(kinds.PriorityClass, "", class)
			},
			func(w *harness.World) error {
				return w.C.Create(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Value: 1000})
			}},
	}
	for _, in := range inputs {
		for _, running := range []bool{false, true} {
			name := in.reason + "/new"
			if running {
				name = in.reason + "/running"
			}
			t.Run(name, func(t *testing.T) {
				w := harness.NewWorld(8, 1)
				f := harness.NewFleet(fleetSpec(profiles[0], "alpha", 3))
				in.name(f)
				create := func() error { _, err := w.C.CreateFleet(f); return err }
				if running {
					must(t, in.add(w))
					must(t, create())
					must(t, w.Converge())
				}
				kept := claimsOf(w)
				must(t, in.remove(w))
				if running {
					must(t, w.Scale("alpha", 5))
				} else {
					must(t, create())
				}
				must(t, w.Step(30))
				got := w.C.Fleet(harness.Namespace, "alpha")
				if c := degraded(got); c == nil || c.Reason != in.reason {
					t.Errorf("Degraded %+v: want %s", c, in.reason)
				}
				s := w.C.StatefulSet(harness.Namespace, "alpha")
				switch {
				case !running && s != nil:
					t.Errorf("a StatefulSet was created for a fleet whose input is missing")
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
				if running && len(w.C.Pods(harness.Namespace)) != 3 {
					t.Errorf("%d member Pods while held; want the 3 that ran", len(w.C.Pods(harness.Namespace)))
				}
				must(t, in.add(w))
				must(t, w.Converge())
				want := int32(3)
				if running {
					want = 5
				}
				wantSteady(t, w, want, "once the input exists")
			})
		}
	}
}

// A workload the API server refuses as rendered from the spec holds the fleet with
// Degraded=SpecRefused, on every profile: a new fleet gets no workload, a running one keeps its
// workload as it is after the refused scale-up, and no member or disk is lost. The refused spec
// is not sent again: every pass is judged by the hold judge, which refuses a workload write on a
// view that holds the refusal of the current generation. A new spec is tried, and converges.
func TestRefusedSpecHoldsTheFleet(t *testing.T) {
	for _, base := range profiles {
		for _, running := range []bool{false, true} {
			name := fmt.Sprintf("%s-%s/new", base.Profile, base.Workload)
			if running {
				name = fmt.Sprintf("%s-%s/running", base.Profile, base.Workload)
			}
			t.Run(name, func(t *testing.T) {
				w := harness.NewWorld(8, 1)
				if running {
					must(t, w.CreateFleet(fleetSpec(base, "alpha", 3)))
					must(t, w.Converge())
				}
				workload := workloadOf(w)
				kept, pods := claimsOf(w), podUIDs(w)
				w.C.InjectRefusals(1)
				if running {
					must(t, w.Scale("alpha", 5))
				} else {
					must(t, w.CreateFleet(fleetSpec(base, "alpha", 3)))
				}
				must(t, w.Step(30))
				got := w.C.Fleet(harness.Namespace, "alpha")
				if c := degraded(got); c == nil || c.Reason != "SpecRefused" || !strings.Contains(c.Message, "injected") {
					t.Errorf("Degraded %+v: want SpecRefused quoting the API server", c)
				}
				wantKept(t, w, workload, kept, pods)
				must(t, w.SetImage("alpha", "celld:v2"))
				must(t, w.Converge())
				want := int32(3)
				if running {
					want = 5
				}
				wantSteady(t, w, want, "once the spec changed")
			})
		}
	}
}

// A fleet whose bucket another fleet holds is held, on every profile and whether the holder
// runs in its namespace or another: Degraded=BucketReserved, no workload, no claim. Every pass
// is judged by the hold judge, which refuses a workload write and a status that does not hold
// the fleet on a view whose operator-made reservation binds another fleet. The holder deleted,
// its reservation still keeps the bucket; once a person deletes that, the waiting fleet binds it
// and converges.
func TestReservedBucketHoldsTheFleet(t *testing.T) {
	for _, base := range profiles {
		for _, ns := range []string{harness.Namespace, "tenant-b"} {
			t.Run(fmt.Sprintf("%s-%s/holder-in-%s", base.Profile, base.Workload, ns), func(t *testing.T) {
				w := harness.NewWorld(8, 1)
				holder := harness.NewFleet(fleetSpec(base, "alpha", 3))
				holder.Namespace = ns
				_, err := w.C.CreateFleet(holder)
				must(t, err)
				must(t, w.Converge())
				spec := fleetSpec(base, "beta", 3)
				spec.Bucket = "bucket-alpha"
				must(t, w.CreateFleet(spec))
				must(t, w.Step(30))
				beta := w.C.Fleet(harness.Namespace, "beta")
				if c := degraded(beta); c == nil || c.Reason != "BucketReserved" {
					t.Errorf("Degraded %+v: want BucketReserved", c)
				}
				if w.C.StatefulSet(harness.Namespace, "beta") != nil || w.C.Deployment(harness.Namespace, "beta") != nil {
					t.Errorf("a workload was created for a fleet whose bucket another fleet holds")
				}
				for c := range claimsOf(w) {
					if strings.HasPrefix(c, "data-beta-") {
						t.Errorf("claim %s of the held fleet", c)
					}
				}

				name := render.ReservationName(beta.Spec.Bucket)
				must(t, w.C.DeleteFleet(ns, "alpha"))
				must(t, w.Step(30))
				if r := w.C.Reservation(ns, name); r == nil || r.Spec.FleetUID == beta.UID {
					t.Errorf("the deleted holder's reservation: %+v; want it kept for the holder", r)
				}
				if c := degraded(w.C.Fleet(harness.Namespace, "beta")); c == nil || c.Reason != "BucketReserved" {
					t.Errorf("with the holder deleted, Degraded %+v: want BucketReserved", c)
				}
				must(t, w.C.DeleteReservation(ns, name))
				must(t, w.Converge())
				if got := w.C.Fleet(harness.Namespace, "beta"); got.Status.State != v1alpha1.StateSteady || got.Status.Members.Ready != 3 {
					t.Errorf("once the reservation is released: %s with %d ready; want Steady with 3", got.Status.State, got.Status.Members.Ready)
				}
			})
		}
	}
}
