package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestBucketPolicyAdmission: a policy is refused unless the admission policy can read it as meant:
// a namespace selection, selector operators it knows with values exactly where they count, and
// stores in the canonical form a fleet's endpoint is compared in (never a spelling that would
// silently match nothing).
func TestBucketPolicyAdmission(t *testing.T) {
	adm := loadAdmission(t, "celld.io_celldbucketpolicies.yaml")
	base := func() map[string]any {
		return map[string]any{
			"apiVersion": "celld.io/v1alpha1", "kind": "CelldBucketPolicy", "metadata": map[string]any{"name": "team-a"},
			"spec": map[string]any{
				"namespaces": map[string]any{"names": []any{"team-a"}},
				"buckets":    []any{map[string]any{"name": "team-a-*"}},
			},
		}
	}
	for _, c := range []struct {
		name  string
		path  []string
		value any
		// refusal is part of the message, "" when admitted.
		refusal string
	}{
		{"the base", nil, nil, ""},
		{"no namespaces", []string{"spec", "namespaces"}, map[string]any{}, "must have names or a selector"},
		{"every namespace", []string{"spec", "namespaces"}, map[string]any{"selector": map[string]any{}}, ""},
		{"a namespace name in upper case", []string{"spec", "namespaces", "names"}, []any{"Team-A"}, "spec.namespaces.names[0]"},
		{"matchLabels", []string{"spec", "namespaces"}, map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"team": "a"}}}, ""},
		{"In with values", []string{"spec", "namespaces"}, map[string]any{"selector": map[string]any{"matchExpressions": []any{
			map[string]any{"key": "team", "operator": "In", "values": []any{"a"}}}}}, ""},
		{"In without values", []string{"spec", "namespaces"}, map[string]any{"selector": map[string]any{"matchExpressions": []any{
			map[string]any{"key": "team", "operator": "In"}}}}, "must be non-empty for In and NotIn"},
		{"Exists with values", []string{"spec", "namespaces"}, map[string]any{"selector": map[string]any{"matchExpressions": []any{
			map[string]any{"key": "team", "operator": "Exists", "values": []any{"a"}}}}}, "absent for Exists"},
		{"an operator of another kind", []string{"spec", "namespaces"}, map[string]any{"selector": map[string]any{"matchExpressions": []any{
			map[string]any{"key": "team", "operator": "Gt", "values": []any{"1"}}}}}, "operator"},
		{"no bucket at all", []string{"spec", "buckets"}, []any{}, ""},
		{"a pattern in upper case", []string{"spec", "buckets"}, []any{map[string]any{"name": "Team-*"}}, "spec.buckets[0].name"},
		{"a host", []string{"spec", "buckets"}, []any{map[string]any{"name": "x", "store": "minio.example.com"}}, ""},
		{"an address", []string{"spec", "buckets"}, []any{map[string]any{"name": "x", "store": "2001:db8::1"}}, ""},
		{"Amazon", []string{"spec", "buckets"}, []any{map[string]any{"name": "x", "store": "s3.amazonaws.com"}}, ""},
		{"a URL", []string{"spec", "buckets"}, []any{map[string]any{"name": "x", "store": "https://minio.example.com"}}, "canonical form"},
		{"a port", []string{"spec", "buckets"}, []any{map[string]any{"name": "x", "store": "minio.example.com:9000"}}, "canonical form"},
		{"upper case", []string{"spec", "buckets"}, []any{map[string]any{"name": "x", "store": "MinIO.example.com"}}, "canonical form"},
		{"a trailing dot", []string{"spec", "buckets"}, []any{map[string]any{"name": "x", "store": "minio.example.com."}}, "canonical form"},
		{"an address not canonical", []string{"spec", "buckets"}, []any{map[string]any{"name": "x", "store": "2001:DB8:0::1"}}, "canonical form"},
		{"an Amazon regional host", []string{"spec", "buckets"}, []any{map[string]any{"name": "x", "store": "s3.eu-west-1.amazonaws.com"}}, "s3.amazonaws.com"},
		{"an empty store", []string{"spec", "buckets"}, []any{map[string]any{"name": "x", "store": ""}}, "canonical form"},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := base()
			if c.path != nil {
				set(obj, c.value, c.path...)
			}
			err := adm.admit(obj)
			switch {
			case c.refusal == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.refusal != "" && err == nil:
				t.Errorf("admitted; want a refusal saying %q", c.refusal)
			case c.refusal != "" && !strings.Contains(err.Error(), c.refusal):
				t.Errorf("refusal %q does not say %q", err, c.refusal)
			case err == nil:
				var p v1alpha1.CelldBucketPolicy
				if err := decodeInto(obj, &p); err != nil {
					t.Errorf("admitted, but does not decode: %v", err)
				}
			}
		})
	}
}
