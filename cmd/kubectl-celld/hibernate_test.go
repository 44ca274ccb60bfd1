package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestHibernateAndWakeWriteOnlyTheField: hibernate and wake set spec.hibernate and nothing else
// (spec.members stays what it was); a fleet that does not exist is named in the error.
func TestHibernateAndWakeWriteOnlyTheField(t *testing.T) {
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team"}, Spec: v1alpha1.CelldFleetSpec{Members: 3}}
	cl := clients{kube: kubefake.NewSimpleClientset(), celld: celldfake.NewSimpleClientset(f)}
	ctx := context.Background()
	for _, want := range []bool{true, false} {
		if err := setHibernate(ctx, cl, "team", "alpha", want); err != nil {
			t.Fatal(err)
		}
		got, err := cl.celld.CelldV1alpha1().CelldFleets("team").Get(ctx, "alpha", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.Hibernate != want || got.Spec.Members != 3 {
			t.Errorf("after setting hibernate=%t: spec.hibernate %t, spec.members %d (want 3)", want, got.Spec.Hibernate, got.Spec.Members)
		}
	}
	if err := setHibernate(ctx, cl, "team", "beta", true); err == nil || !strings.Contains(err.Error(), `celldfleet "beta" not found in namespace "team"`) {
		t.Errorf("a missing fleet: %v", err)
	}
}

// TestStatusShowsHibernation: status says the fleet sleeps, what is kept and how to wake it.
func TestStatusShowsHibernation(t *testing.T) {
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team"},
		Spec: v1alpha1.CelldFleetSpec{Members: 3, Hibernate: true}, Status: v1alpha1.CelldFleetStatus{State: v1alpha1.StateHibernated}}
	var b bytes.Buffer
	printStatus(&b, &report{fleet: f}, time.Now(), 0)
	if !strings.Contains(b.String(), "Hibernation:  ASLEEP") || !strings.Contains(b.String(), "kubectl celld wake alpha") ||
		!strings.Contains(b.String(), "size (3 members) kept") {
		t.Errorf("status of a hibernated fleet:\n%s", b.String())
	}
	f.Spec.Hibernate, f.Status.State = false, v1alpha1.StateSteady
	b.Reset()
	printStatus(&b, &report{fleet: f}, time.Now(), 0)
	if strings.Contains(b.String(), "Hibernation:") {
		t.Errorf("status of a fleet awake says hibernation:\n%s", b.String())
	}
}
