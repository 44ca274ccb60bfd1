package reservation

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fleet(ns, name string, age time.Duration, bound bool) *v1alpha1.CelldFleet {
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name),
		CreationTimestamp: metav1.NewTime(t0.Add(-age))}}
	f.Spec.Bucket = v1alpha1.BucketSpec{Name: "b", Region: "eu-west-1"}
	if bound {
		f.Finalizers = []string{v1alpha1.FleetFinalizer}
	}
	return f
}

func reservation(name string, age time.Duration, b v1alpha1.BucketSpec) *v1alpha1.CelldReservation {
	return &v1alpha1.CelldReservation{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))},
		Spec: v1alpha1.CelldReservationSpec{Bucket: b}}
}

// TestTheOldestReservationBindsTheBucket, whatever its name; the others are conflicts, and a
// reservation of another bucket is none of them.
func TestTheOldestReservationBindsTheBucket(t *testing.T) {
	f := fleet("ns", "a", 0, false)
	other := f.Spec.Bucket
	other.Name = "other"
	rs := []*v1alpha1.CelldReservation{reservation("z", time.Hour, f.Spec.Bucket), reservation("y", 2*time.Hour, f.Spec.Bucket),
		reservation("x", 3*time.Hour, other)}
	first, others := Binding(f, rs)
	if first == nil || first.Name != "y" || others != 1 {
		t.Errorf("binding %v with %d others; want y with 1", first, others)
	}
	if first, others := Binding(f, rs[2:]); first != nil || others != 0 {
		t.Errorf("another bucket's reservation bound it: %v, %d", first, others)
	}
}

// TestABoundFleetOutranksAnOlderOne: the finalizer first, then age, then namespace/name.
func TestABoundFleetOutranksAnOlderOne(t *testing.T) {
	young, old := fleet("ns", "young", time.Minute, true), fleet("ns", "old", time.Hour, false)
	if !Stronger(young, old) || Stronger(old, young) {
		t.Error("a fleet bound to the bucket must outrank an older one that is not")
	}
	a, b := fleet("ns", "a", time.Hour, false), fleet("ns", "b", time.Hour, false)
	if !Stronger(a, b) || Stronger(b, a) {
		t.Error("at the same age, namespace/name decides")
	}
	if got := Strongest(b, []*v1alpha1.CelldFleet{young, old, a, b}); got != young {
		t.Errorf("strongest rival of b: %v, want young", got.Name)
	}
	if got := Strongest(young, []*v1alpha1.CelldFleet{young, old, a, b}); got != nil {
		t.Errorf("young has the strongest claim, got rival %v", got.Name)
	}
}
