package sim

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/loop"
	"github.com/celld/celld-operator/machine"
)

// firstService is the first Service the fleet's prerequisites render.
func firstService(f *v1alpha1.CelldFleet) *corev1.Service {
	for _, o := range prerequisites(f) {
		if s, ok := o.(*corev1.Service); ok {
			return s
		}
	}
	return nil
}

// Sent as the driver sends it, an applied object is written only when it is absent or the
// fleet's own: someone else's under that name is left as it is, and no request is sent.
func TestApplyNeverWritesSomeoneElsesObject(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	svc := firstService(f)
	must(t, c.Create(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}))
	before := c.get(KindService, ns, svc.Name).GetResourceVersion()
	requests := len(c.Requests())
	err := c.Send(context.Background(), &loop.Target{}, machine.Action{Kind: machine.Apply, Key: "apply/Service/" + svc.Name, Ref: kinds.Ref{Namespace: ns, Name: svc.Name}, Object: svc})
	if !errors.Is(err, machine.ErrPremiseChanged) {
		t.Fatalf("apply over someone else's Service: %v; want a refusal", err)
	}
	mustEqual(t, "resourceVersion", c.get(KindService, ns, svc.Name).GetResourceVersion(), before)
	mustEqual(t, "requests sent", len(c.Requests()), requests)
}

// Between the owner check and the write, someone deletes the fleet's Service and creates one of
// their own under its name: the write carries the UID the check read, so it is refused as the API
// server refuses it (Invalid on metadata.uid), as a changed premise, and their Service is left as
// it is. Deleted and not created again, the Service is not created in its place (a Conflict).
func TestApplyHoldsToTheObjectItsOwnerCheckRead(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	svc := firstService(f)
	ctx := context.Background()
	apply := machine.Action{Kind: machine.Apply, Key: "apply/Service/" + svc.Name, Ref: kinds.Ref{Namespace: ns, Name: svc.Name}, Object: svc}
	must(t, c.Send(ctx, &loop.Target{}, apply))
	checked, err := loop.Check(ctx, simWriter{c: c, req: &Request{}}, &loop.Target{}, apply)
	must(t, err)
	mustEqual(t, "the UID the check read", checked.UID, c.get(KindService, ns, svc.Name).GetUID())

	must(t, c.Delete(KindService, ns, svc.Name))
	err = c.Do(checked)
	if !apierrors.IsConflict(err) {
		t.Fatalf("apply after the Service was deleted: %v; want a Conflict", err)
	}
	if c.get(KindService, ns, svc.Name) != nil {
		t.Fatal("the apply created the deleted Service again")
	}

	must(t, c.Create(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}))
	before := c.get(KindService, ns, svc.Name).GetResourceVersion()
	err = c.Do(checked)
	if !errors.Is(err, machine.ErrPremiseChanged) || apierrors.IsInvalid(err) {
		t.Fatalf("apply after the Service was replaced: %v; want a changed premise, not the spec's refusal", err)
	}
	mustEqual(t, "resourceVersion", c.get(KindService, ns, svc.Name).GetResourceVersion(), before)
}
