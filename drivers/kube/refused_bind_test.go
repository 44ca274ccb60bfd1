package kube

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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
	"github.com/celld/celld-operator/loop"
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
	if err := ctl.syncAndWrite(context.Background(), key("team", "alpha")); err == nil {
		t.Fatal("the first sync must fail on the refused reservation")
	}
	celld.ClearActions()
	if err := ctl.syncAndWrite(context.Background(), key("team", "alpha")); err != nil {
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

// TestForbiddenReservationIsDegradedThenRetried: a reservation the API server forbids (a
// namespace being deleted, a policy, a permission not yet granted) ends in Degraded on the next
// sync, and is tried again once loop.ForbiddenRetry has passed, not before.
func TestForbiddenReservationIsDegradedThenRetried(t *testing.T) {
	defer func(d time.Duration) { loop.ForbiddenRetry = d }(loop.ForbiddenRetry)
	loop.ForbiddenRetry = 300 * time.Millisecond
	f := testFleet(v1alpha1.ProfileBucket)
	f.Generation = 1
	kube, celld := kubefake.NewClientset(), celldfake.NewSimpleClientset(f.DeepCopy())
	celld.PrependReactor("create", "celldreservations", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "celld.io", Resource: "celldreservations"}, "x",
			fmt.Errorf("unable to create new content in namespace team because it is being terminated"))
	})
	ctl, err := NewController(Clients{Kube: kube, Celld: celld, Recorder: record.NewFakeRecorder(10)},
		Options{Log: zerolog.Nop(), Metrics: NewMetrics()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.inf.Fleets.GetIndexer().Add(f); err != nil {
		t.Fatal(err)
	}
	creates := func() int {
		n := 0
		for _, a := range celld.Actions() {
			if a.GetVerb() == "create" && a.GetResource().Resource == "celldreservations" {
				n++
			}
		}
		return n
	}
	if err := ctl.syncAndWrite(context.Background(), key("team", "alpha")); err == nil {
		t.Fatal("the first sync must fail on the forbidden reservation")
	}
	if err := ctl.syncAndWrite(context.Background(), key("team", "alpha")); err != nil {
		t.Fatalf("the second sync must publish the refusal: %v", err)
	}
	degraded := false
	for _, a := range celld.Actions() {
		if p, ok := a.(k8stesting.PatchActionImpl); ok && a.GetSubresource() == "status" && strings.Contains(string(p.Patch), "being terminated") {
			degraded = true
		}
	}
	if !degraded || creates() != 1 {
		t.Errorf("after the refusal: Degraded published %t, reservation creates %d; want true and 1", degraded, creates())
	}
	time.Sleep(loop.ForbiddenRetry + 100*time.Millisecond)
	_ = ctl.syncAndWrite(context.Background(), key("team", "alpha"))
	if creates() != 2 {
		t.Errorf("reservation creates after loop.ForbiddenRetry: %d, want 2", creates())
	}
}
