package e2e

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/kube"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/render"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestApplyHoldsToTheObjectItsOwnerCheckRead runs the operator's driver against the API server
// with a person acting between its owner check's read of a fleet's Service and the apply that
// follows. Replaced by the person's Service, the apply is refused as a changed premise (the API
// server answers Invalid on metadata.uid) and the person's Service is left as it is; deleted, the
// apply is a Conflict and creates nothing. No operator runs: nothing else writes the Service.
func TestApplyHoldsToTheObjectItsOwnerCheckRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fl := f.create(f.newFleet("race", v1alpha1.ProfileBucket, 1))
	svc := render.OfType[*corev1.Service](render.Render(fl, 1, -1))[0]
	services := suite.kube.CoreV1().Services(f.ns)

	cfg, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var between func()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/services/"+svc.Name) {
				mu.Lock()
				act := between
				between = nil
				mu.Unlock()
				if act != nil {
					act()
				}
			}
			return resp, err
		})
	})
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ap := &kube.Applier{Kube: kc, Celld: suite.celld}
	apply := func(act func()) error {
		mu.Lock()
		between = act
		mu.Unlock()
		return ap.Do(f.ctx, &kube.Target{Fleet: fl}, machine.Action{Kind: machine.Apply, Key: "apply/Service/" + svc.Name,
			Ref: kinds.Ref{Kind: "Service", Namespace: f.ns, Name: svc.Name}, Object: svc.DeepCopy()})
	}
	del := func() {
		if err := services.Delete(f.ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete the fleet's Service: %v", err)
		}
	}
	person := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc.Name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}

	if err := apply(nil); err != nil {
		t.Fatalf("the fleet's Service: %v", err)
	}
	var theirs *corev1.Service
	err = apply(func() {
		del()
		var cerr error
		if theirs, cerr = services.Create(f.ctx, person.DeepCopy(), metav1.CreateOptions{}); cerr != nil {
			t.Errorf("the person's Service: %v", cerr)
		}
	})
	if !errors.Is(err, machine.ErrPremiseChanged) || apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.uid") {
		t.Errorf("replaced between the check and the apply: %v; want a changed premise from the API server's refusal of metadata.uid", err)
	}
	if now, gerr := services.Get(f.ctx, svc.Name, metav1.GetOptions{}); gerr != nil || theirs == nil ||
		now.UID != theirs.UID || now.ResourceVersion != theirs.ResourceVersion || len(now.OwnerReferences) != 0 {
		t.Errorf("replaced between the check and the apply: the person's Service was written (%v)", gerr)
	}

	if err := services.Delete(f.ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := apply(nil); err != nil {
		t.Fatalf("the fleet's Service again: %v", err)
	}
	if err := apply(del); !apierrors.IsConflict(err) {
		t.Errorf("deleted between the check and the apply: %v; want a Conflict", err)
	}
	if _, err := services.Get(f.ctx, svc.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deleted between the check and the apply: the Service was created again (%v)", err)
	}
}
