package sim

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/loop"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/reservation"
)

// maxRetries bounds AppendHistory's re-read-and-retry loop, as client-go's RetryOnConflict
// bounds it (retry.DefaultRetry: five steps).
const maxRetries = 5

// BindReservation creates the reservation; one that already exists bound to the same fleet
// UID is success (an earlier pass created it), bound to another is the refusal the operator
// reports.
func (w simWriter) BindReservation(_ context.Context, _ *loop.Target, a machine.Action) error {
	c, req := w.c, w.req
	r, ok := a.Object.(*v1alpha1.CelldReservation)
	if !ok {
		return fmt.Errorf("object %T is not a *v1alpha1.CelldReservation", a.Object)
	}
	r = r.DeepCopy()
	if r.Namespace == "" {
		r.Namespace = a.Namespace
	}
	req.Verb, req.Resource, req.Namespace, req.Name = "create", row(KindReservation).Resource.Resource, r.Namespace, r.Name
	if err := c.conflict(KindReservation, r.Name); err != nil {
		return err
	}
	if cur, ok := c.get(KindReservation, r.Namespace, r.Name).(*v1alpha1.CelldReservation); ok {
		if cur.Spec.FleetUID == r.Spec.FleetUID {
			return nil
		}
		return fmt.Errorf("reservation %s/%s binds bucket %q to fleet %s (uid %s), not to uid %s: %w",
			cur.Namespace, cur.Name, cur.Spec.Bucket.Name, cur.Spec.FleetName, cur.Spec.FleetUID, r.Spec.FleetUID,
			apierrors.NewAlreadyExists(row(KindReservation).Resource, r.Name))
	}
	// The status subresource makes the server drop status on create; the server records who
	// wrote the spec, which is how the operator knows its own reservations.
	r.Status = v1alpha1.CelldReservationStatus{}
	r.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: kinds.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: v1alpha1.SchemeGroupVersion.String(), FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}
	if err := c.create(r); err != nil {
		return err
	}
	req.Changed = true
	return nil
}

// AppendHistory is a read-modify-write with optimistic concurrency: on a conflict it re-reads
// and tries again, and a decision already last in the history is not appended twice.
func (w simWriter) AppendHistory(_ context.Context, _ *loop.Target, a machine.Action) error {
	c, req := w.c, w.req
	req.Verb, req.Resource = "update", row(KindReservation).Resource.Resource+"/status"
	if len(a.Decisions) == 0 {
		return fmt.Errorf("no decision to append to reservation %s/%s", a.Namespace, a.Name)
	}
	for {
		cur, ok := c.get(KindReservation, a.Namespace, a.Name).(*v1alpha1.CelldReservation)
		if !ok {
			return apierrors.NewNotFound(row(KindReservation).Resource, a.Name)
		}
		next := cur.DeepCopy()
		next.Status.CapacityHistory = reservation.AppendAll(next.Status.CapacityHistory, a.Decisions)
		if equality.Semantic.DeepEqual(next.Status.CapacityHistory, cur.Status.CapacityHistory) {
			return nil
		}
		if err := c.conflict(KindReservation, a.Name); err != nil {
			if req.Retries < maxRetries {
				req.Retries++
				continue
			}
			return err
		}
		req.Changed = c.put(next)
		return nil
	}
}

// ClearHistory empties a reservation's capacity history, as a person might.
func (c *Cluster) ClearHistory(namespace, name string) error {
	cur, ok := c.get(KindReservation, namespace, name).(*v1alpha1.CelldReservation)
	if !ok {
		return fmt.Errorf("clear history of reservation %s/%s: %w", namespace, name,
			apierrors.NewNotFound(row(KindReservation).Resource, name))
	}
	next := cur.DeepCopy()
	next.Status.CapacityHistory = nil
	c.put(next)
	return nil
}

// DeleteReservation deletes a reservation, as only a person does: it frees the bucket.
func (c *Cluster) DeleteReservation(namespace, name string) error {
	if _, err := c.delete(KindReservation, namespace, name, deletion{}); err != nil {
		return fmt.Errorf("delete reservation %s/%s: %w", namespace, name, err)
	}
	return nil
}
