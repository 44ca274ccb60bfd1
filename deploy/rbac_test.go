package deploy_test

import (
	"os"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/kinds"
)

// TestRolesGrantEveryOwnedKind: the operator caches and server-side applies every owned kind of
// kinds.Table, so both ways of installing it grant each one get, list, watch, create and patch. A
// kind added to the table fails here until deploy/ (and the chart, TestChartMatchesManifests)
// grants it, rather than at its first apply on a cluster.
func TestRolesGrantEveryOwnedKind(t *testing.T) {
	for _, file := range []string{"rbac/cluster_role.yaml", "namespaced/role.yaml"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var role struct {
			Rules []struct {
				APIGroups []string `json:"apiGroups"`
				Resources []string `json:"resources"`
				Verbs     []string `json:"verbs"`
			} `json:"rules"`
		}
		if err := yaml.Unmarshal(b, &role); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, r := range kinds.Owned(true) {
			var granted []string
			for _, rule := range role.Rules {
				if slices.Contains(rule.APIGroups, r.Resource.Group) && slices.Contains(rule.Resources, r.Resource.Resource) {
					granted = append(granted, rule.Verbs...)
				}
			}
			for _, verb := range []string{"get", "list", "watch", "create", "patch"} {
				if !slices.Contains(granted, verb) {
					t.Errorf("%s: %s of %s is not granted (owned kind %s)", file, verb, r.GVR().GroupResource(), r.Kind)
				}
			}
		}
	}
}
