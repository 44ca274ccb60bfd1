package e2e

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestBothVersionsServeEveryFleet: v1beta1 and v1alpha1 serve every fleet, whichever version
// wrote it, with the same spec and status; a new object is stored as v1beta1; and a fleet made
// as v1beta1 is run by the operator (which reads v1alpha1) to Ready.
func TestBothVersionsServeEveryFleet(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startOperator()
	cfg, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	beta := dyn.Resource(schema.GroupVersionResource{Group: v1alpha1.GroupName, Version: "v1beta1", Resource: "celldfleets"}).Namespace(f.ns)
	alpha := dyn.Resource(schema.GroupVersionResource{Group: v1alpha1.GroupName, Version: "v1alpha1", Resource: "celldfleets"}).Namespace(f.ns)

	asAlpha := f.create(f.newFleet("alpha", v1alpha1.ProfileBucket, 2))
	// The same fleet written as v1beta1: the v1alpha1 object with another apiVersion.
	raw, err := json.Marshal(f.newFleet("beta", v1alpha1.ProfileBucket, 2))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &obj.Object); err != nil {
		t.Fatal(err)
	}
	obj.SetAPIVersion(v1alpha1.GroupName + "/v1beta1")
	obj.SetKind("CelldFleet")
	asBeta, err := beta.Create(f.ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a fleet as v1beta1: %v", err)
	}
	t.Cleanup(func() { f.deleteFleet(asBeta.GetName(), false) })
	for _, name := range []string{asAlpha.Name, asBeta.GetName()} {
		f.waitConverged(name)
		if got := storedAs(t, "celldfleets", f.ns, name); got != v1alpha1.GroupName+"/v1beta1" {
			t.Errorf("fleet %s stored as %s, want celld.io/v1beta1", name, got)
		}
		a, errA := alpha.Get(f.ctx, name, metav1.GetOptions{})
		b, errB := beta.Get(f.ctx, name, metav1.GetOptions{})
		if errA != nil || errB != nil {
			t.Fatalf("fleet %s: v1alpha1 %v, v1beta1 %v", name, errA, errB)
		}
		if a.GetAPIVersion() != "celld.io/v1alpha1" || b.GetAPIVersion() != "celld.io/v1beta1" {
			t.Errorf("fleet %s served as %s and %s", name, a.GetAPIVersion(), b.GetAPIVersion())
		}
		if !reflect.DeepEqual(a.Object["spec"], b.Object["spec"]) || !reflect.DeepEqual(a.Object["status"], b.Object["status"]) ||
			a.GetResourceVersion() != b.GetResourceVersion() || a.GetUID() != b.GetUID() {
			t.Errorf("fleet %s differs between the versions:\nv1alpha1 %v\nv1beta1  %v", name, a.Object, b.Object)
		}
	}
	for _, version := range []string{"v1alpha1", "v1beta1"} {
		out, err := kubectlCmd(f.ctx, "get", "celldfleets."+version+".celld.io", "-n", f.ns, "-o", "name")
		names := strings.Fields(out)
		slices.Sort(names)
		if want := []string{"celldfleet.celld.io/alpha", "celldfleet.celld.io/beta"}; err != nil || !slices.Equal(names, want) {
			t.Errorf("kubectl get celldfleets.%s.celld.io: %v %q, want %v", version, err, out, want)
		}
	}
}
