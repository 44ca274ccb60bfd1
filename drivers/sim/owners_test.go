package sim

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/loop"
	"github.com/celld/celld-operator/machine"
)

// Sent as the driver sends it, an applied object is written only when it is absent or the
// fleet's own: someone else's under that name is left as it is, and no request is sent.
func TestApplyNeverWritesSomeoneElsesObject(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	var svc *corev1.Service
	for _, o := range prerequisites(f) {
		if s, ok := o.(*corev1.Service); ok {
			svc = s
			break
		}
	}
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
