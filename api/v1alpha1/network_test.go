package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestNetworkAdmission: spec.network.allowedClients takes peers that name whom they allow, and
// refuses, naming the field, an entry that names no one, one that selects every Pod of every
// namespace, an ipBlock of every address, and more entries than its bound.
func TestNetworkAdmission(t *testing.T) {
	adm := loadAdmission(t, "celld.io_celldfleets.yaml")
	try := func(peers ...map[string]any) error {
		obj := baseFleet(v1alpha1.ProfilePersistentFleet)
		list := make([]any, len(peers))
		for i, p := range peers {
			list[i] = p
		}
		set(obj, list, "spec", "network", "allowedClients")
		return adm.admit(obj)
	}
	labels := func(k, v string) map[string]any { return map[string]any{"matchLabels": map[string]any{k: v}} }
	expr := map[string]any{"matchExpressions": []any{map[string]any{"key": "team", "operator": "Exists"}}}
	for _, ok := range [][]map[string]any{
		{},
		{{"podSelector": labels("role", "client")}},
		{{"podSelector": map[string]any{}}}, // every Pod of the fleet's namespace, the default
		{{"namespaceSelector": labels("kubernetes.io/metadata.name", "apps")}},
		{{"namespaceSelector": expr}},
		{{"namespaceSelector": map[string]any{}, "podSelector": labels("role", "client")}},
		{{"namespaceSelector": labels("team", "a"), "podSelector": map[string]any{}}},
		{{"ipBlock": map[string]any{"cidr": "10.0.0.0/8"}}},
	} {
		if err := try(ok...); err != nil {
			t.Errorf("%v refused: %v", ok, err)
		}
	}
	many := make([]map[string]any, 33)
	for i := range many {
		many[i] = map[string]any{"podSelector": labels("role", "client")}
	}
	for _, bad := range []struct {
		peers []map[string]any
		want  string
	}{
		{[]map[string]any{{}}, "spec.network.allowedClients: every entry must set podSelector, namespaceSelector or ipBlock"},
		{[]map[string]any{{"podSelector": labels("role", "client")}, {}}, "every entry must set podSelector"},
		{[]map[string]any{{"namespaceSelector": map[string]any{}}}, "lets every Pod of every namespace reach the client port"},
		{[]map[string]any{{"namespaceSelector": map[string]any{"matchLabels": map[string]any{}}}}, "lets every Pod of every namespace"},
		{[]map[string]any{{"namespaceSelector": map[string]any{}, "podSelector": map[string]any{}}}, "lets every Pod of every namespace"},
		{[]map[string]any{{"namespaceSelector": map[string]any{}, "podSelector": map[string]any{"matchExpressions": []any{}}}}, "lets every Pod of every namespace"},
		{[]map[string]any{{"ipBlock": map[string]any{"cidr": "0.0.0.0/0"}}}, "an ipBlock of prefix length 0"},
		{[]map[string]any{{"ipBlock": map[string]any{"cidr": "::/0"}}}, "an ipBlock of prefix length 0"},
		{many, "spec.network.allowedClients"},
	} {
		err := try(bad.peers...)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v; want refused saying %q", bad.peers, err, bad.want)
		}
	}
}
