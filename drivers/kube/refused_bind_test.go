package kube

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestRefusedReservationIsDegraded: a reservation the API server refuses ends in Degraded
// (SpecRefused, in the API server's words) on the next sync, and is not asked for again, nor is
// any workload created, until the spec changes.
func TestRefusedReservationIsDegraded(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	f.Generation = 1
	kube, celld := kubefake.NewClientset(), celldfake.NewSimpleClientset(f.DeepCopy())
	celld.PrependReactor("create", "celldreservations", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "celld.io", Kind: "CelldReservation"}, "x",
			field.ErrorList{field.Invalid(field.NewPath("metadata", "labels"), "x", "must be no more than 63 characters")})
	})
	ctl, err := NewController(Clients{Kube: kube, Celld: celld, Recorder: record.NewFakeRecorder(10)},
		Options{Log: zerolog.Nop(), Metrics: NewMetrics()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.inf.Fleets.GetIndexer().Add(f); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Sync(context.Background(), "team/alpha"); err == nil {
		t.Fatal("the first sync must fail on the refused reservation")
	}
	celld.ClearActions()
	if err := ctl.Sync(context.Background(), "team/alpha"); err != nil {
		t.Fatalf("the second sync must publish the refusal, not retry it: %v", err)
	}
	var status *v1alpha1.CelldFleetStatus
	for _, a := range append(celld.Actions(), kube.Actions()...) {
		if a.GetVerb() == "create" && a.GetResource().Resource == "celldreservations" {
			t.Errorf("the refused reservation was asked for again")
		}
		if strings.HasSuffix(a.GetResource().Resource, "deployments") && a.GetVerb() == "patch" {
			t.Errorf("a workload was applied with no reservation")
		}
		if p, ok := a.(k8stesting.PatchActionImpl); ok && a.GetSubresource() == "status" {
			status = &v1alpha1.CelldFleetStatus{}
			if !strings.Contains(string(p.Patch), "SpecRefused") || !strings.Contains(string(p.Patch), "CelldReservation/") || !strings.Contains(string(p.Patch), "63 characters") {
				t.Errorf("status patch lacks Degraded SpecRefused naming the reservation and the limit: %s", p.Patch)
			}
		}
	}
	if status == nil {
		t.Error("no status was published")
	}
}
