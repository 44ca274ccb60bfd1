package kube

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

// operatorMade gives a reservation the managedFields the API server records when the operator
// creates it.
func operatorMade(r *v1alpha1.CelldReservation) *v1alpha1.CelldReservation {
	return writtenBy(r, FieldManager)
}

func writtenBy(r *v1alpha1.CelldReservation, manager string) *v1alpha1.CelldReservation {
	r = r.DeepCopy()
	r.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: v1alpha1.SchemeGroupVersion.String(), FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}},"f:spec":{"f:fleetUID":{}}}`)}}}
	return r
}

func TestMadeByOperator(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	mine := render.RenderReservation(f)
	relabelled := operatorMade(mine)
	delete(relabelled.Labels, kinds.LabelManagedBy)
	statusOnly := writtenBy(mine, FieldManager)
	statusOnly.ManagedFields[0].Subresource = "status"
	cases := []struct {
		name string
		r    *v1alpha1.CelldReservation
		want bool
	}{
		{"created by the operator", operatorMade(mine), true},
		{"no managedFields", mine, false},
		{"created by kubectl", writtenBy(mine, "kubectl-create"), false},
		{"the operator wrote only its status", statusOnly, false},
		{"without the operator's label", relabelled, false},
	}
	for _, c := range cases {
		if got := madeByOperator(c.r); got != c.want {
			t.Errorf("%s: madeByOperator %v, want %v", c.name, got, c.want)
		}
	}
	// The cache keeps what madeByOperator reads, and only that.
	kept, _ := keepSpecWriters(statusOnly.DeepCopy())
	if n := len(kept.(*v1alpha1.CelldReservation).ManagedFields); n != 0 {
		t.Errorf("status writers kept in the cache: %d", n)
	}
	kept, _ = keepSpecWriters(operatorMade(mine))
	if !madeByOperator(kept.(*v1alpha1.CelldReservation)) {
		t.Errorf("the cache lost what says the operator made the reservation")
	}
}

// TestObserveIgnoresWhatTheOperatorDidNotMake: a reservation the operator did not make reserves
// nothing, and under the name the fleet would create it holds the fleet; someone else's objects
// under the fleet's derived names are reported, never observed as the fleet's; a claim under a
// claim name is seen whatever its labels, and only under the exact name.
func TestObserveIgnoresWhatTheOperatorDidNotMake(t *testing.T) {
	f := testFleet(v1alpha1.ProfilePersistentFleet)
	objs := render.Render(f, 3, 3)
	squat := writtenBy(render.RenderReservation(f), "kubectl-create")
	squat.Namespace, squat.Spec.FleetUID, squat.Labels[kinds.LabelFleetUID] = "elsewhere", "uid-forged", "uid-forged"
	forgedHere := writtenBy(render.RenderReservation(f), "kubectl-create")
	userService := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "alpha-peers", Namespace: "team"}}
	old := f.DeepCopy()
	old.UID = "uid-previous"
	oldPolicy := render.OfType[*networkingv1.NetworkPolicy](render.Render(old, 3, 3))[0] // a fleet of the same name before this one
	claim := func(name string, labels map[string]string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: types.UID("uid-" + name), Labels: labels}}
	}
	i := testInformers(t, f, squat, forgedHere, objs.StatefulSet, render.OfType[*corev1.Service](objs)[0], userService, oldPolicy, render.OfType[*networkingv1.NetworkPolicy](objs)[1], render.OfType[*policyv1.PodDisruptionBudget](objs)[0],
		claim("data-alpha-0", nil), claim("data-alpha-01", nil), claim("data-alpha-x-0", nil), claim("data-other-0", nil))
	o, err := i.Observe(key("team", "alpha"), time.Unix(1000, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Reservations) != 0 {
		t.Errorf("reservations %d, want none: neither was made by the operator", len(o.Reservations))
	}
	want := []string{"CelldReservation/" + render.ReservationName(f.Spec.Bucket), "NetworkPolicy/alpha-clients", "Service/alpha-peers"}
	got := slices.Sorted(slices.Values(o.Unowned))
	if !slices.Equal(got, want) {
		t.Errorf("unowned %v, want %v", got, want)
	}
	services, policies := ownedOfType[*corev1.Service](o), ownedOfType[*networkingv1.NetworkPolicy](o)
	if pdbs := ownedOfType[*policyv1.PodDisruptionBudget](o); len(services) != 1 || services[0].Name != "alpha" || len(policies) != 1 || policies[0].Name != "alpha-peers" || len(pdbs) != 1 || o.StatefulSet == nil {
		t.Errorf("owned: services %d, policies %d, pdbs %d, statefulset %v", len(services), len(policies), len(pdbs), o.StatefulSet != nil)
	}
	var claims []string
	for _, c := range o.PVCs {
		claims = append(claims, c.Name)
	}
	if !slices.Equal(claims, []string{"data-alpha-0"}) {
		t.Errorf("claims %v, want the unlabelled claim under the exact claim name only", claims)
	}
}
