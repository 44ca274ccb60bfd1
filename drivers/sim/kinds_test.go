package sim

import (
	"slices"
	"testing"

	"github.com/celld/celld-operator/kinds"
)

// TestStoresEveryKindOfTheTable: a kind added to the table is stored, resynced and visited by
// every whole-cluster pass, in a fixed order.
func TestStoresEveryKindOfTheTable(t *testing.T) {
	for _, r := range kinds.Table {
		if !slices.Contains(kindOrder, r.Kind) {
			t.Errorf("kind %s of the table is not in kindOrder", r.Kind)
		}
	}
	if len(kindOrder) != len(kinds.Table) {
		t.Errorf("kindOrder has %d kinds, the table %d", len(kindOrder), len(kinds.Table))
	}
}
