package reservation

import (
	"github.com/celld/celld-operator/api/v1alpha1"
)

// Binding is the reservation that binds f's bucket, nil when none does, and how many other
// reservations of the same bucket exist (made by hand). The oldest reservation wins: a bucket is
// bound to the first fleet that reserved it.
func Binding(f *v1alpha1.CelldFleet, rs []*v1alpha1.CelldReservation) (first *v1alpha1.CelldReservation, others int) {
	n := 0
	for _, r := range rs {
		// By identity, not by name: a reservation made under any naming, and any spelling of the
		// bucket, holds it.
		if !SameBucket(r.Spec.Bucket, f.Spec.Bucket) {
			continue
		}
		if first == nil || r.CreationTimestamp.Before(&first.CreationTimestamp) ||
			(r.CreationTimestamp.Equal(&first.CreationTimestamp) && r.Namespace+"/"+r.Name < first.Namespace+"/"+first.Name) {
			first = r
		}
		n++
	}
	if first == nil {
		return nil, 0
	}
	return first, n - 1
}

// Strongest is the rival with a stronger claim to the bucket than f, nil when f's is the
// strongest. A fleet that carries the finalizer was bound to the bucket (a refused fleet never
// gets it) and may still run members that use it, so it comes first; then the oldest fleet, then
// the namespace/name.
func Strongest(f *v1alpha1.CelldFleet, rivals []*v1alpha1.CelldFleet) *v1alpha1.CelldFleet {
	var best *v1alpha1.CelldFleet
	for _, r := range rivals {
		if r.UID == f.UID || !SameBucket(r.Spec.Bucket, f.Spec.Bucket) {
			continue
		}
		if Stronger(r, f) && (best == nil || Stronger(r, best)) {
			best = r
		}
	}
	return best
}

// Stronger reports whether a's claim to a bucket both name beats b's.
func Stronger(a, b *v1alpha1.CelldFleet) bool {
	if fa, fb := HasFinalizer(a), HasFinalizer(b); fa != fb {
		return fa
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// HasFinalizer reports whether the fleet carries the operator's finalizer: it was bound to its
// bucket once.
func HasFinalizer(f *v1alpha1.CelldFleet) bool {
	for _, fin := range f.Finalizers {
		if fin == v1alpha1.FleetFinalizer {
			return true
		}
	}
	return false
}
