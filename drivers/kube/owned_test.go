package kube

import (
	"testing"

	"github.com/celld/celld-operator/kinds"
)

// TestEveryOwnedKindHasAClient: an owned kind added to the table can be applied, and the driver
// applies nothing the table does not call owned.
func TestEveryOwnedKindHasAClient(t *testing.T) {
	for _, r := range kinds.Table {
		if _, ok := ownedClients[r.Kind]; ok != r.Owned {
			t.Errorf("kind %s: owned %t, client %t", r.Kind, r.Owned, ok)
		}
	}
}
