package events

import (
	"bytes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// FieldManager is the one field manager of everything the operator writes.
const FieldManager = "celld-operator"

// MadeByOperator reports whether the operator made a reservation: only those are trusted to
// reserve a bucket. deploy/rbac/reservation_policy.yaml lets no one but the operator's
// ServiceAccount create or change a reservation, so one the operator did not make was made
// before that policy, or by an administrator by hand: it binds nothing, and one under the name
// a fleet would create holds that fleet (NameTaken) until a person deletes it.
//
// The operator's reservations carry its managed-by label, and the API server recorded the
// operator's field manager as the writer of their spec when it created them.
func MadeByOperator(r *v1alpha1.CelldReservation) bool {
	if r.Labels[LabelManagedBy] != ManagedBy {
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
