package render

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/reservation"
)

// ReservationName names the reservation of a bucket after its canonical identity, so every
// spelling of one bucket names one reservation and no bucket name equals a derived one.
func ReservationName(b v1alpha1.BucketSpec) string {
	return reservation.Name(reservation.IdentityOf(b))
}

// RenderReservation renders the reservation that binds the fleet's bucket to its UID. It has no
// owner reference: it outlives the fleet.
func RenderReservation(f *v1alpha1.CelldFleet) *v1alpha1.CelldReservation {
	l := SelectorLabels(f)
	l[kinds.LabelManagedBy] = kinds.ManagedBy
	l[kinds.LabelComponent] = "reservation"
	return &v1alpha1.CelldReservation{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "CelldReservation"},
		ObjectMeta: metav1.ObjectMeta{Name: ReservationName(f.Spec.Bucket), Namespace: f.Namespace, Labels: l},
		Spec: v1alpha1.CelldReservationSpec{
			FleetName: f.Name, FleetUID: f.UID, Profile: f.Spec.Profile, Bucket: f.Spec.Bucket,
		},
	}
}
