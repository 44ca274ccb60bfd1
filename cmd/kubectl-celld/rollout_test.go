package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestRolloutApproveTakesTheHeldRevision: approve writes the revision the status shows held, and
// only that one: with no rollout staged, none held, or another revision asked for, it refuses
// and says why.
func TestRolloutApproveTakesTheHeldRevision(t *testing.T) {
	fleet := func(staged bool, r *v1alpha1.RolloutStatus) *v1alpha1.CelldFleet {
		f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team"}}
		if staged {
			f.Spec.Rollout = &v1alpha1.RolloutSpec{Canary: 1}
		}
		f.Status.Rollout = r
		return f
	}
	held := &v1alpha1.RolloutStatus{Revision: "alpha-new", CurrentRevision: "alpha-old", Updated: 1, Total: 3, Partition: 2, Held: true}
	rolling := &v1alpha1.RolloutStatus{Revision: "alpha-new", CurrentRevision: "alpha-old", Updated: 2, Total: 3}
	for _, tc := range []struct {
		name string
		f    *v1alpha1.CelldFleet
		want string
		rev  string
		err  string
	}{
		{"held", fleet(true, held), "", "alpha-new", ""},
		{"held, the revision checked", fleet(true, held), "alpha-new", "alpha-new", ""},
		{"held, another revision asked for", fleet(true, held), "alpha-other", "", "holds revision alpha-new, not alpha-other"},
		{"rolling, not held", fleet(true, rolling), "", "", "no rollout held"},
		{"nothing in flight", fleet(true, nil), "", "", "no rollout held"},
		{"not staged", fleet(false, nil), "", "", "spec.rollout is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev, err := heldRevision(tc.f, tc.want)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || rev != tc.rev {
				t.Fatalf("revision %q, %v; want %q", rev, err, tc.rev)
			}
		})
	}
	if l := rolloutLine(fleet(true, held)); !strings.HasPrefix(l, "HELD: revision alpha-new on 1 of 3 members (canary 1), the rest on alpha-old") ||
		!strings.Contains(l, "kubectl celld rollout approve alpha") {
		t.Errorf("held: %q", l)
	}
	if l := rolloutLine(fleet(true, rolling)); !strings.Contains(l, "revision alpha-new on 2 of 3 members") || strings.Contains(l, "HELD") {
		t.Errorf("rolling: %q", l)
	}
	if l := rolloutLine(fleet(false, nil)); l != "" {
		t.Errorf("not staged: %q, want nothing", l)
	}
}
