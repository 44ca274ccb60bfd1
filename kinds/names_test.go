package kinds

import (
	"slices"
	"testing"
)

// A claim belongs to a member only under exactly the name ClaimName gives it: a claim another
// tool named close to it is never taken for a member's disk, nor deleted as one.
func TestClaimFleet(t *testing.T) {
	for _, c := range []struct {
		name    string
		fleet   string
		ordinal int
		ok      bool
	}{
		{"data-a-0", "a", 0, true},
		{"data-a-12", "a", 12, true},
		{"data-a-1-0", "a-1", 0, true},
		{"data--0", "", -1, false},
		{"data-a", "", -1, false},
		{"data-a-", "", -1, false},
		{"data-a-01", "", -1, false},
		{"data-a-+1", "", -1, false},
		{"data-a-x", "", -1, false},
		{"logs-a-0", "", -1, false},
	} {
		fleet, ordinal, ok := ClaimFleet(c.name)
		if fleet != c.fleet || ordinal != c.ordinal || ok != c.ok {
			t.Errorf("ClaimFleet(%q) = %q, %d, %t; want %q, %d, %t", c.name, fleet, ordinal, ok, c.fleet, c.ordinal, c.ok)
		}
		if c.ok && ClaimName(fleet, ordinal) != c.name {
			t.Errorf("ClaimName(%q, %d) = %q, want %q back", fleet, ordinal, ClaimName(fleet, ordinal), c.name)
		}
	}
}

// Every suffix an owned kind adds to a fleet's name is listed once: the names a fleet reserves
// (and that another fleet's name must not collide with) are exactly these.
func TestDerivedSuffixes(t *testing.T) {
	for _, r := range Owned(true) {
		for _, s := range r.Suffixes {
			if s != "" && !slices.Contains(DerivedSuffixes, s) {
				t.Errorf("DerivedSuffixes %q lacks %s's %q", DerivedSuffixes, r.Kind, s)
			}
		}
	}
	for i, s := range DerivedSuffixes {
		if s == "" || slices.Contains(DerivedSuffixes[i+1:], s) {
			t.Errorf("DerivedSuffixes %q: %q is empty or listed twice", DerivedSuffixes, s)
		}
	}
	for _, s := range []string{SuffixPeers, SuffixClients} {
		if !slices.Contains(DerivedSuffixes, s) {
			t.Errorf("DerivedSuffixes %q lacks %q", DerivedSuffixes, s)
		}
	}
}
