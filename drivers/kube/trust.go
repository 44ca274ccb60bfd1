package kube

import (
	"bytes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// madeByOperator reports whether the operator made a reservation: only those are trusted to
// reserve a bucket. deploy/rbac/reservation_policy.yaml lets no one but the operator's
// ServiceAccount create or change a reservation, so one the operator did not make was made
// before that policy, or by an administrator by hand: it binds nothing, and one under the name
// a fleet would create holds that fleet (NameTaken) until a person deletes it.
//
// The operator's reservations carry its managed-by label, and the API server recorded the
// operator's field manager as the writer of their spec when it created them.
func madeByOperator(r *v1alpha1.CelldReservation) bool {
	if r.Labels[events.LabelManagedBy] != events.ManagedBy {
		return false
	}
	for _, m := range r.ManagedFields {
		if m.Manager == FieldManager && m.Operation == metav1.ManagedFieldsOperationUpdate && m.Subresource == "" &&
			m.FieldsV1 != nil && bytes.Contains(m.FieldsV1.Raw, []byte(`"f:spec"`)) {
			return true
		}
	}
	return false
}

// keepSpecWriters strips a reservation's managedFields to the entries that wrote its spec, which
// madeByOperator reads; the rest (status appends) is dropped as for every other cache.
func keepSpecWriters(obj any) (any, error) {
	r, ok := obj.(*v1alpha1.CelldReservation)
	if !ok {
		return dropManagedFields(obj)
	}
	var keep []metav1.ManagedFieldsEntry
	for _, m := range r.ManagedFields {
		if m.Subresource == "" && m.FieldsV1 != nil && bytes.Contains(m.FieldsV1.Raw, []byte(`"f:spec"`)) {
			keep = append(keep, m)
		}
	}
	r.ManagedFields = keep
	return r, nil
}
