package capacity

import (
	"encoding/json"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/deploy/crds"
)

// TestBoundsAndDefaultsAreTheCRDs: the bounds and defaults the policy repeats are the CRD's, in
// every version. A recommendation above the CRD's maximum is a size the API server refuses to
// write; a default apart from the CRD's decides an object that skipped defaulting otherwise than
// the same object defaulted.
func TestBoundsAndDefaultsAreTheCRDs(t *testing.T) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crds.CelldFleet, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
		capacity := spec.Properties["capacity"]
		for _, b := range []struct {
			field    string
			min, max *float64
		}{
			{"spec.members", spec.Properties["members"].Minimum, spec.Properties["members"].Maximum},
			{"spec.capacity.minMembers", capacity.Properties["minMembers"].Minimum, capacity.Properties["minMembers"].Maximum},
			{"spec.capacity.maxMembers", capacity.Properties["maxMembers"].Minimum, capacity.Properties["maxMembers"].Maximum},
		} {
			if b.min == nil || b.max == nil || *b.min != minMembers || *b.max != maxMembers {
				t.Errorf("%s %s: the CRD bounds it to [%v, %v], the policy to [%d, %d]", v.Name, b.field, deref(b.min), deref(b.max), minMembers, maxMembers)
			}
		}
		var target int32
		var window string
		if d := capacity.Properties["targetUtilization"].Default; d == nil || json.Unmarshal(d.Raw, &target) != nil || target != DefaultTargetUtilization {
			t.Errorf("%s spec.capacity.targetUtilization: the CRD defaults it to %s, the policy to %d", v.Name, raw(d), DefaultTargetUtilization)
		}
		if d := capacity.Properties["scaleInStabilization"].Default; d == nil || json.Unmarshal(d.Raw, &window) != nil {
			t.Errorf("%s spec.capacity.scaleInStabilization: the CRD defaults it to %s", v.Name, raw(d))
		} else if got, err := time.ParseDuration(window); err != nil || got != DefaultStabilization {
			t.Errorf("%s spec.capacity.scaleInStabilization: the CRD defaults it to %s, the policy to %s", v.Name, window, DefaultStabilization)
		}
	}
}

func deref(f *float64) any {
	if f == nil {
		return "none"
	}
	return *f
}

func raw(j *apiextensionsv1.JSON) string {
	if j == nil {
		return "nothing"
	}
	return string(j.Raw)
}
