package kube

import (
	"bytes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// madeByOperator: see kinds.MadeByOperator, the one rule the simulator's observation keeps too.
func madeByOperator(r *v1alpha1.CelldReservation) bool { return kinds.MadeByOperator(r) }

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
