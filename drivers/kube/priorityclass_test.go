package kube

import (
	"testing"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	"github.com/celld/celld-operator/api/v1alpha1"
)

// A fleet naming a priority class is told it is missing only once the class cache has synced
// and lacks it: not knowing is not missing.
func TestPriorityClassMissingOnlyWhenKnown(t *testing.T) {
	kube := kubefake.NewClientset(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "fleet-critical"}, Value: 1000})
	i := NewInformers(kube, celldfake.NewSimpleClientset(), nil, nil)
	naming := func(class string) *v1alpha1.CelldFleet {
		f := testFleet(v1alpha1.ProfilePersistentFleet)
		f.Spec.Pod.PriorityClassName = class
		return f
	}
	if i.priorityClassMissing(naming("absent")) {
		t.Fatal("a class cache that has not synced proves nothing missing")
	}
	stop := make(chan struct{})
	defer close(stop)
	go i.PriorityClasses.Run(stop)
	if !cache.WaitForCacheSync(stop, i.PriorityClasses.HasSynced) {
		t.Fatal("the class cache never synced")
	}
	for class, missing := range map[string]bool{"absent": true, "fleet-critical": false, "": false} {
		if got := i.priorityClassMissing(naming(class)); got != missing {
			t.Errorf("priorityClassName %q: missing %t, want %t", class, got, missing)
		}
	}
}
