package events

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/reservation"
)

// TestBucketSpellingsConflict: a fleet that spells another fleet's bucket differently sees that
// fleet's reservation, whether it was made under the canonical name or the old one, and, with no
// reservation, sees that fleet as the stronger claimant.
func TestBucketSpellingsConflict(t *testing.T) {
	first := v1alpha1.BucketSpec{Name: "data", Region: "us-east-1"}
	spellings := []string{"https://s3.amazonaws.com", "HTTPS://S3.AMAZONAWS.COM:443/", "https://s3.us-east-1.amazonaws.com.", "https://data.s3.amazonaws.com"}
	for _, e := range spellings {
		second := v1alpha1.BucketSpec{Name: "data", Region: "eu-west-1", Endpoint: e}
		f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns2", UID: "u2", CreationTimestamp: metav1.NewTime(t0.Add(time.Minute))},
			Spec: v1alpha1.CelldFleetSpec{Bucket: second}}
		rival := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns1", UID: "u1", CreationTimestamp: metav1.NewTime(t0)},
			Spec: v1alpha1.CelldFleetSpec{Bucket: first}}
		for _, name := range []string{reservation.Name(reservation.IdentityOf(first)), reservation.LegacyName(first)} {
			r := &v1alpha1.CelldReservation{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns1", CreationTimestamp: metav1.NewTime(t0)},
				Spec: v1alpha1.CelldReservationSpec{FleetName: "a", FleetUID: "u1", Bucket: first}}
			v := Normalize("ns2", "b", &Observation{Now: t0, Fleet: f, Reservations: []*v1alpha1.CelldReservation{r}, Rivals: []*v1alpha1.CelldFleet{rival}})
			if !v.Reservation.Exists || v.Reservation.BoundTo != "u1" || v.Reservation.Name != name {
				t.Errorf("endpoint %q: reservation %s of %+v not seen: %+v", e, name, first, v.Reservation)
			}
		}
		v := Normalize("ns2", "b", &Observation{Now: t0, Fleet: f, Rivals: []*v1alpha1.CelldFleet{rival}})
		if v.Reservation.Claimant == nil || v.Reservation.Claimant.UID != "u1" {
			t.Errorf("endpoint %q: the older fleet on %+v is not the claimant: %+v", e, first, v.Reservation)
		}
	}
}
