package kube

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

func TestObserveGathersTheFleetsObjects(t *testing.T) {
	f := testFleet(v1alpha1.ProfilePersistentFleet)
	f.Spec.ServiceAccountName = "celld-iam"
	objs := render.Render(f, 3, 3)
	old := f.DeepCopy()
	old.UID = "uid-previous-alpha"
	stale := memberPod(old, "alpha-9", "node-a") // a Pod of an earlier fleet of the same name
	member := memberPod(f, "alpha-0", "node-a")
	claim := func(name string, uid string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team",
			Labels: map[string]string{kinds.LabelInstance: "alpha", kinds.LabelFleetUID: uid}}}
	}
	foreignDeploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team"}}
	i := testInformers(t, f, operatorMade(render.RenderReservation(f)), objs.StatefulSet, foreignDeploy, render.OfType[*corev1.Service](objs)[0], render.OfType[*corev1.Service](objs)[1],
		render.OfType[*policyv1.PodDisruptionBudget](objs)[0], member, stale, claim("data-alpha-0", "uid-alpha"), claim("data-alpha-1", "uid-previous-alpha"),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-z"}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}})
	now := time.Unix(1000, 0)
	o, err := i.Observe(key("team", "alpha"), now, &events.Utilization{Percent: 50})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case o.Fleet != f || !o.Now.Equal(now) || o.Utilization == nil:
		t.Errorf("fleet, time or utilization not carried")
	case len(o.Reservations) != 1:
		t.Errorf("reservations %d, want 1", len(o.Reservations))
	case o.StatefulSet == nil || o.Deployment != nil:
		t.Errorf("want the owned StatefulSet and not the Deployment the fleet does not own")
	case len(ownedOfType[*corev1.Service](o)) != 2 || len(ownedOfType[*policyv1.PodDisruptionBudget](o)) != 1:
		t.Errorf("owned objects: %v", o.Owned)
	case len(o.Pods) != 1 || o.Pods[0].Name != "alpha-0":
		t.Errorf("pods %v, want the one with this fleet's UID", o.Pods)
	case len(o.PVCs) != 2:
		t.Errorf("claims %d, want both by name, whatever their UID", len(o.PVCs))
	case len(o.Nodes) != 1 || o.Nodes["node-a"] == nil:
		t.Errorf("nodes %v, want the members' node", o.Nodes)
	case o.StorageClass == nil:
		t.Errorf("storage class not found")
	case o.ServiceAccountMissing:
		t.Errorf("a ServiceAccount cache that never synced proves nothing missing")
	}

	if err := i.Fleets.GetIndexer().Delete(f); err != nil {
		t.Fatal(err)
	}
	if o, err := i.Observe(key("team", "alpha"), now, nil); err != nil || o.Fleet != nil {
		t.Errorf("a gone fleet observes as nil, got %v, %v", o.Fleet, err)
	}
}

// ownedOfType lists the observed owned objects of Go type T.
func ownedOfType[T kinds.Object](o *events.Observation) []T {
	var out []T
	for _, x := range o.Owned {
		if t, ok := x.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
