package main

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/deploy/crds"
)

func TestLeaseHeld(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renewed time.Duration, duration int32) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "celld-system", Name: leaseName}}
		if holder != "" {
			l.Spec.HolderIdentity = &holder
		}
		if renewed >= 0 {
			at := metav1.NewMicroTime(now.Add(-renewed))
			l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &at, &duration
		}
		return l
	}
	for _, c := range []struct {
		name  string
		lease *coordinationv1.Lease
		want  string // empty: held
	}{
		{"renewed 3s ago, 15s lease", lease("pod-a_1", 3*time.Second, 15), ""},
		{"renewed just within its duration", lease("pod-a_1", 15*time.Second, 15), ""},
		{"no holder (released)", lease("", 3*time.Second, 15), "has no holder: no replica leads"},
		{"never renewed", lease("pod-a_1", -1, 15), "was never renewed"},
		{"renewed beyond its duration", lease("pod-a_1", 16*time.Second, 15), "was last renewed 16s ago, beyond its 15s"},
	} {
		err := leaseHeld(c.lease, now)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}

	missing := leads(context.Background(), fake.NewSimpleClientset(), "celld-system", time.Now)
	if missing == nil || !strings.Contains(missing.Error(), "celld-system/celld-operator") || !strings.Contains(missing.Error(), "is the operator installed in celld-system?") {
		t.Errorf("no Lease: %v", missing)
	}
}

// TestSameVersions: the release's CRD matches itself however its numbers were decoded, and an
// installed CRD that lacks a version, or whose schema differs by one bound, is named.
func TestSameVersions(t *testing.T) {
	var release map[string]any
	if err := yaml.Unmarshal(crds.CelldFleet, &release); err != nil {
		t.Fatal(err)
	}
	installed := func() map[string]any {
		var m map[string]any
		if err := yaml.Unmarshal(crds.CelldFleet, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if err := sameVersions(installed(), release); err != nil {
		t.Errorf("the release's CRD against itself: %v", err)
	}
	// The API client decodes whole numbers as int64, YAML as float64.
	asClient := installed()
	versions := asClient["spec"].(map[string]any)["versions"].([]any)
	props := versions[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)
	members := props["spec"].(map[string]any)["properties"].(map[string]any)["members"].(map[string]any)
	members["minimum"] = int64(1)
	if err := sameVersions(asClient, release); err != nil {
		t.Errorf("numbers decoded as int64: %v", err)
	}
	members["minimum"] = int64(0)
	if err := sameVersions(asClient, release); err == nil || !strings.Contains(err.Error(), "is not this release's: apply this release's CRDs") {
		t.Errorf("a schema with another bound: %v", err)
	}
	older := installed()
	older["spec"].(map[string]any)["versions"] = []any{}
	if err := sameVersions(older, release); err == nil || !strings.Contains(err.Error(), "has no version v1alpha1, v1beta1:") {
		t.Errorf("a CRD without either version: %v", err)
	}
	// An older release's CRD: v1alpha1 alone, exactly as this release writes it.
	alphaOnly := installed()
	var kept []any
	for _, v := range alphaOnly["spec"].(map[string]any)["versions"].([]any) {
		if v.(map[string]any)["name"] == "v1alpha1" {
			kept = append(kept, v)
		}
	}
	alphaOnly["spec"].(map[string]any)["versions"] = kept
	if err := sameVersions(alphaOnly, release); err == nil || !strings.Contains(err.Error(), "has no version v1beta1:") {
		t.Errorf("a CRD without v1beta1: %v", err)
	}
}
