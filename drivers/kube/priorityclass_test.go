package kube

import (
	"testing"
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// A fleet naming a priority class is told it is missing only once the class cache has synced
// and lacks it: not knowing is not missing.
func TestPriorityClassMissingOnlyWhenKnown(t *testing.T) {
	kube := kubefake.NewClientset(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "fleet-critical"}, Value: 1000})
	i := NewInformers(kube, celldfake.NewSimpleClientset(), nil, nil)
	missing := func(class string) bool {
		t.Helper()
		f := testFleet(v1alpha1.ProfilePersistentFleet)
		f.Spec.Pod.PriorityClassName = class
		if err := i.Fleets.GetIndexer().Update(f); err != nil {
			t.Fatal(err)
		}
		o, err := i.Observe(events.KeyOf(f), time.Time{}, nil)
		if err != nil || o.Fleet == nil {
			t.Fatalf("observe %s: %v, fleet %v", f.Name, err, o)
		}
		return o.PriorityClassMissing
	}
	if missing("absent") {
		t.Fatal("a class cache that has not synced proves nothing missing")
	}
	stop := make(chan struct{})
	defer close(stop)
	go i.PriorityClasses.Run(stop)
	if !cache.WaitForCacheSync(stop, i.PriorityClasses.HasSynced) {
		t.Fatal("the class cache never synced")
	}
	for class, want := range map[string]bool{"absent": true, "fleet-critical": false, "": false} {
		if got := missing(class); got != want {
			t.Errorf("priorityClassName %q: missing %t, want %t", class, got, want)
		}
	}
}
