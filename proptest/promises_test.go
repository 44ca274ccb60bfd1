package proptest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/proptest/harness"
	"github.com/celld/celld-operator/proptest/judge"
)

// The random sequences draw uninstalls and claims of no or another fleet among the other faults;
// these stories play each at every moment that matters, on every profile, so that the two
// promises do not rest on what a seed happens to draw. Every round is judged by the same
// checker as TestContract (Step fails on any broken clause, the uninstall and hold judges
// included); the stories then check the end state the promises name.

var profiles = []harness.FleetSpec{
	{Profile: v1alpha1.ProfilePersistentFleet},
	{Profile: v1alpha1.ProfileBucket, Workload: v1alpha1.WorkloadDeployment},
	{Profile: v1alpha1.ProfileBucket, Workload: v1alpha1.WorkloadOrderedStatefulSet},
}

func fleetSpec(base harness.FleetSpec, name string, members int32) harness.FleetSpec {
	base.Name, base.Members, base.Bucket, base.Grace = name, members, "bucket-"+name, 20*time.Second
	return base
}

// claimsOf names a namespace's claims with their UIDs: a claim deleted, or deleted and made
// again, shows.
func claimsOf(w *harness.World) map[string]types.UID {
	out := map[string]types.UID{}
	for _, c := range w.C.PVCs(harness.Namespace) {
		if c.DeletionTimestamp == nil {
			out[c.Name] = c.UID
		}
	}
	return out
}

// An uninstall (the fleets' CustomResourceDefinition deleted) changes nothing but the finalizer:
// running, or at any point of a deletion a person asked for before, the fleet goes without a
// workload write, a member stopped, a Pod or a claim deleted, in that pass or any later one, and
// once the operator is installed again, a fleet created under the same name is held by the old
// claims and never deletes them.
func TestUninstallChangesNothingButTheFinalizer(t *testing.T) {
	for _, base := range profiles {
		for _, deletedBefore := range []int{-1, 0, 1, 3, 8} {
			name := fmt.Sprintf("%s-%s/deleted-%d-rounds-before", base.Profile, base.Workload, deletedBefore)
			t.Run(name, func(t *testing.T) {
				w := harness.NewWorld(6, 1)
				must(t, w.CreateFleet(fleetSpec(base, "alpha", 3)))
				must(t, w.Converge())
				if deletedBefore >= 0 {
					must(t, w.Delete("alpha"))
					must(t, w.Step(deletedBefore))
				}
				if w.C.Fleet(harness.Namespace, "alpha") == nil {
					t.Skip("the deletion ended before the uninstall")
				}
				kept := claimsOf(w)
				must(t, w.Uninstall())
				must(t, w.Step(20))
				if f := w.C.Fleet(harness.Namespace, "alpha"); f != nil {
					t.Fatalf("the fleet is still there after its CRD was deleted: finalizers %v", f.Finalizers)
				}
				for c, uid := range kept {
					if got := claimsOf(w)[c]; got != uid {
						t.Errorf("claim %s (uid %s) did not outlive the uninstall: now %q", c, uid, got)
					}
				}
				if w.Check.J.Extra[judge.UninstallRequests] == 0 {
					t.Errorf("no request of the uninstalled fleet was judged")
				}

				// Installed again, a fleet of the same name finds the old claims, which carry the
				// old UID: it is held, and they stay. (Another bucket: the old fleet's
				// reservation stays, and would refuse it first.)
				served, err := w.Reinstall()
				must(t, err)
				if !served {
					t.Fatal("the CRD still terminates with no fleet left")
				}
				again := fleetSpec(base, "alpha", 3)
				again.Bucket = "bucket-alpha-again"
				must(t, w.CreateFleet(again))
				must(t, w.Step(20))
				if base.Profile == v1alpha1.ProfilePersistentFleet && len(kept) > 0 {
					f := w.C.Fleet(harness.Namespace, "alpha")
					if c := degraded(f); c == nil || c.Reason != "ForeignDisks" {
						t.Errorf("the new fleet on the old fleet's claims is not held: Degraded %v", c)
					}
					if s := w.C.StatefulSet(harness.Namespace, "alpha"); s != nil {
						t.Errorf("the new fleet got a StatefulSet that adopts the old claims")
					}
				}
				must(t, w.Delete("alpha"))
				must(t, w.Converge())
				for c, uid := range kept {
					if got := claimsOf(w)[c]; got != uid {
						t.Errorf("claim %s of the uninstalled fleet was deleted with the new fleet", c)
					}
				}
			})
		}
	}
}

func degraded(f *v1alpha1.CelldFleet) *struct{ Status, Reason, Message string } {
	if f == nil {
		return nil
	}
	for _, c := range f.Status.Conditions {
		if c.Type == v1alpha1.ConditionDegraded && c.Status == "True" {
			return &struct{ Status, Reason, Message string }{string(c.Status), c.Reason, c.Message}
		}
	}
	return nil
}

// A claim under a fleet's disk name that carries no fleet label, or another fleet's, holds the
// fleet (Degraded ForeignDisks naming it) before any workload exists, holds a running fleet where
// it is, and is never deleted, not even when the fleet is.
func TestForeignClaimHoldsTheFleet(t *testing.T) {
	for _, label := range []types.UID{"", "uid-of-another-fleet"} {
		for _, before := range []bool{true, false} {
			t.Run(fmt.Sprintf("label-%q/before-the-fleet-%t", label, before), func(t *testing.T) {
				w := harness.NewWorld(8, 1)
				spec := fleetSpec(profiles[0], "alpha", 3)
				// Before the fleet, the claim of its first member: the StatefulSet would mount
				// it. Beside a running fleet, the claim of the member a scale-up would add.
				claim, ordinal := "data-alpha-0", 0
				if !before {
					must(t, w.CreateFleet(spec))
					must(t, w.Converge())
					claim, ordinal = "data-alpha-3", 3
				}
				must(t, w.ForeignClaim("alpha", label, ordinal))
				uid := w.C.PVC(harness.Namespace, claim).UID
				if before {
					must(t, w.CreateFleet(spec))
				} else {
					must(t, w.Scale("alpha", 5))
				}
				must(t, w.Step(30))
				f := w.C.Fleet(harness.Namespace, "alpha")
				if c := degraded(f); c == nil || c.Reason != "ForeignDisks" || !strings.Contains(c.Message, claim) {
					t.Errorf("Degraded %+v: want ForeignDisks naming %s", c, claim)
				}
				if f.Status.Disks == nil || !contains(f.Status.Disks.Foreign, claim) {
					t.Errorf("status.disks %+v: want %s among the foreign disks", f.Status.Disks, claim)
				}
				s := w.C.StatefulSet(harness.Namespace, "alpha")
				switch {
				case before && s != nil:
					t.Errorf("a StatefulSet of %d replicas exists beside the foreign claim %s", *s.Spec.Replicas, claim)
				case !before && (s == nil || *s.Spec.Replicas != 3):
					t.Errorf("the running fleet was not held at 3 members: %v", s)
				}
				if w.Check.J.Extra[judge.ForeignClaimPasses] == 0 {
					t.Errorf("no pass that saw the claim was judged")
				}
				must(t, w.Delete("alpha"))
				must(t, w.Converge())
				if c := w.C.PVC(harness.Namespace, claim); c == nil || c.UID != uid || c.DeletionTimestamp != nil {
					t.Errorf("the foreign claim %s did not outlive its fleet's deletion: %v", claim, c)
				}
				for _, c := range w.C.PVCs(harness.Namespace) {
					if c.Name != claim && c.Labels["app.kubernetes.io/instance"] == "alpha" {
						t.Errorf("the fleet's own claim %s outlived it", c.Name)
					}
				}
			})
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// wantSteady wants the fleet alpha Steady with that many members ready, after what the story
// names.
func wantSteady(t *testing.T, w *harness.World, ready int32, after string) {
	t.Helper()
	if got := w.C.Fleet(harness.Namespace, "alpha"); got.Status.State != v1alpha1.StateSteady || got.Status.Members.Ready != ready {
		t.Errorf("%s: %s with %d ready; want Steady with %d", after, got.Status.State, got.Status.Members.Ready, ready)
	}
}

// wantKept wants the fleet alpha's workload, claims and member Pods as they were: a held fleet
// changes none of them.
func wantKept(t *testing.T, w *harness.World, workload string, claims, pods map[string]types.UID) {
	t.Helper()
	if now := workloadOf(w); now != workload {
		t.Errorf("the workload while held: %s, want %s", now, workload)
	}
	if now := claimsOf(w); fmt.Sprint(now) != fmt.Sprint(claims) {
		t.Errorf("claims %v while held; want %v", now, claims)
	}
	if now := podUIDs(w); fmt.Sprint(now) != fmt.Sprint(pods) {
		t.Errorf("member Pods %v while held; want %v", now, pods)
	}
}
