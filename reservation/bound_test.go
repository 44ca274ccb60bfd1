package reservation

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/deploy/crds"
)

// TestHistoryFitsTheCRD: the history the operator keeps fits the CRD's maxItems, in every
// version: a longer one is refused on its first write past the CRD's bound, and from then on no
// capacity decision is recorded, so no scale-in window ever starts.
func TestHistoryFitsTheCRD(t *testing.T) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crds.CelldReservation, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		h := v.Schema.OpenAPIV3Schema.Properties["status"].Properties["capacityHistory"]
		switch {
		case h.MaxItems == nil:
			t.Errorf("%s status.capacityHistory: no maxItems", v.Name)
		case MaxHistory > *h.MaxItems:
			t.Errorf("%s status.capacityHistory: maxItems %d, and the operator keeps up to %d entries", v.Name, *h.MaxItems, MaxHistory)
		}
	}
}
