package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestHibernateMembersAdmission: a fleet that stays hibernated keeps spec.members, so that no
// HPA, KEDA or recommendation moves a sleeping fleet; a wake and a new size in one write, a new
// size before sleeping, and sleeping itself are all admitted.
func TestHibernateMembersAdmission(t *testing.T) {
	adm := loadAdmission(t, "celld.io_celldfleets.yaml")
	fleet := func(hibernate bool, members int) map[string]any {
		f := baseFleet(v1alpha1.ProfilePersistentFleet)
		set(f, int64(members), "spec", "members")
		if hibernate {
			set(f, true, "spec", "hibernate")
		}
		return f
	}
	for _, c := range []struct {
		name        string
		old, obj    map[string]any
		refused     bool
		description string
	}{
		{"asleep, members raised", fleet(true, 3), fleet(true, 5), true, "an HPA writing the scale subresource"},
		{"asleep, members lowered", fleet(true, 3), fleet(true, 2), true, "a scale-in asked while asleep"},
		{"asleep, members kept", fleet(true, 3), fleet(true, 3), false, "any other edit"},
		{"wake and resize in one write", fleet(true, 3), fleet(false, 5), false, "a person's deliberate change"},
		{"resize and sleep in one write", fleet(false, 3), fleet(true, 5), false, "the size to wake to"},
		{"awake, members changed", fleet(false, 3), fleet(false, 5), false, "the usual scale"},
		{"sleep", fleet(false, 3), fleet(true, 3), false, "hibernate"},
	} {
		err := adm.update(c.old, c.obj)
		if c.refused {
			if err == nil || !strings.Contains(err.Error(), "spec.members cannot change while the fleet stays hibernated") ||
				!strings.Contains(err.Error(), "wake the fleet first") {
				t.Errorf("%s (%s): %v; want a refusal that names spec.members and says to wake the fleet first", c.name, c.description, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s (%s): refused: %v", c.name, c.description, err)
		}
	}
}
