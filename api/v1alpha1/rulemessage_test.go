package v1alpha1_test

import (
	"regexp"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/deploy/crds"
)

// TestRuleBoundsAreInTheirMessages: every bound a CEL rule of the shipped CRDs compares with (a
// number, a duration, a quantity) is the one its message gives the user. A bound changed in the
// rule alone sends people to a value the API server refuses, or keeps them from one it takes.
func TestRuleBoundsAreInTheirMessages(t *testing.T) {
	compared := regexp.MustCompile(`(?:<=|>=|<|>)\s*([0-9]+)\b`)
	literal := regexp.MustCompile(`(?:duration|quantity)\('([^']+)'\)`)
	// The keys of spec.pod.labels and spec.pod.annotations: their messages give the bounds of a
	// key's parts, which the rule's pattern holds, and not the whole key's, which the API server
	// also checks and names itself.
	parts := regexp.MustCompile(`^spec\.pod\.(labels|annotations) keys must be`)
	checked := 0
	for file, data := range map[string][]byte{"fleets": crds.CelldFleet, "reservations": crds.CelldReservation, "bucket policies": crds.CelldBucketPolicy} {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, v := range crd.Spec.Versions {
			walkRules(v.Schema.OpenAPIV3Schema, func(r apiextensionsv1.ValidationRule) {
				if r.Message == "" {
					return
				}
				var bounds []string
				for _, m := range compared.FindAllStringSubmatch(r.Rule, -1) {
					// Zero is said in words (positive, non-empty), and a pattern's own counts
					// are left to the key rules below.
					if m[1] != "0" && !parts.MatchString(r.Message) {
						bounds = append(bounds, m[1])
					}
				}
				for _, m := range literal.FindAllStringSubmatch(r.Rule, -1) {
					if m[1] != "0" {
						bounds = append(bounds, m[1])
					}
				}
				for _, b := range bounds {
					checked++
					if !regexp.MustCompile(`(^|[^0-9A-Za-z.])` + regexp.QuoteMeta(b) + `($|[^0-9A-Za-z])`).MatchString(r.Message) {
						t.Errorf("%s %s: the rule %q compares with %s, and its message says %q", file, v.Name, r.Rule, b, r.Message)
					}
				}
			})
		}
	}
	if checked < 10 {
		t.Errorf("%d bounds checked: the walk misses rules", checked)
	}
}

func walkRules(s *apiextensionsv1.JSONSchemaProps, f func(apiextensionsv1.ValidationRule)) {
	if s == nil {
		return
	}
	for _, r := range s.XValidations {
		f(r)
	}
	for _, p := range s.Properties {
		walkRules(&p, f)
	}
	if s.Items != nil {
		walkRules(s.Items.Schema, f)
	}
	if s.AdditionalProperties != nil {
		walkRules(s.AdditionalProperties.Schema, f)
	}
}
