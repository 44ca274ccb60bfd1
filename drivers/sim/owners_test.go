package sim

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// As the driver does, the cluster writes an applied object only when it is absent or the fleet's
// own: someone else's under that name is left as it is.
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
	err := c.Do(machine.Action{Kind: machine.Apply, Key: "apply/Service/" + svc.Name, Ref: kinds.Ref{Namespace: ns, Name: svc.Name}, Object: svc})
	if !errors.Is(err, machine.ErrPremiseChanged) {
		t.Fatalf("apply over someone else's Service: %v; want a refusal", err)
	}
	mustEqual(t, "resourceVersion", c.get(KindService, ns, svc.Name).GetResourceVersion(), before)
}
