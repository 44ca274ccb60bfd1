package e2e

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/render"
)

// detectedRow is one state only the operator can detect: how to reach it from a fresh namespace
// with its own operator, what the fleet must say or do about it, and how it recovers.
type detectedRow struct {
	name string
	// state and outcome are what the summary table prints.
	state, outcome string
	run            func(t *testing.T, f *fixture, op *operator) string
}

// TestOperatorDetectedStates: what admission cannot see, or what a person does to the objects
// the operator owns, ends in a Degraded condition whose message names the object and what to
// do, or in a repair; no member Pod of a running fleet and no claim is deleted that should be
// kept; and once the input is fixed the fleet recovers. Each row runs in its own namespace with
// its own operator, in parallel with the others.
func TestOperatorDetectedStates(t *testing.T) {
	t.Parallel()
	rows := []detectedRow{
		{"storage-class-missing", "PersistentFleet naming a StorageClass that does not exist",
			"Degraded=True StorageClassMissing, no StatefulSet and no claim; the class created: hold lifted, StatefulSet created", rowStorageClassMissing},
		{"service-account-missing", "running fleet switched to a ServiceAccount that does not exist",
			"Degraded=True ServiceAccountMissing, workload untouched, members kept; the account created: rolled out to it", rowServiceAccountMissing},
		{"bucket-reserved", "second fleet naming a bucket reserved to a running fleet",
			"Degraded=True / ReservationBound=False BucketReserved, no workload, no finalizer; the owner untouched", rowBucketReserved},
		{"foreign-disks", "claim named like the fleet's carrying another fleet's UID",
			"Degraded=True ForeignDisks, status.disks.foreign, no StatefulSet, the claim kept; the claim removed: converged", rowForeignDisks},
		{"unlabelled-claim", "claim named like the fleet's carrying no label at all; later a claim labelled as the fleet's under another name",
			"Degraded=True ForeignDisks, no StatefulSet to adopt it, the claim kept; removed: converged; the fleet deleted: its own claims only", rowUnlabelledClaim},
		{"member-never-ready", "template whose new member never becomes ready (stand-in for a broken image: a CPU request no node meets)",
			"after the grace period Degraded=True and Progressing=False MemberStuck; no heal, no scale-in, old members kept; fixed: converged", rowMemberNeverReady},
		{"workload-replicas-edited", "StatefulSet scaled by hand, down then up",
			"repaired to spec.members (down: grown back on the same disk; up: one-step scale-in), no claim deleted", rowWorkloadReplicasEdited},
		{"workload-image-edited", "Deployment's image changed by hand",
			"repaired: the image is the spec's again, no heal", rowWorkloadImageEdited},
		{"owned-objects-edited", "Service ports, PDB maxUnavailable, NetworkPolicy ingress and a label edited by hand",
			"repaired: every field the operator sets is back, members kept", rowOwnedObjectsEdited},
		{"owned-objects-deleted", "both Services, the PDB and both NetworkPolicies deleted by hand",
			"re-created, owned by the fleet, members kept", rowOwnedObjectsDeleted},
		{"workload-orphaned", "StatefulSet and Deployment deleted with --cascade=orphan",
			"re-created; each adopts the running members (and their disks): no Pod, no claim deleted", rowWorkloadOrphaned},
		{"name-taken", "same-named Deployment that the fleet does not own",
			"Degraded=True NameTaken, the Deployment untouched; removed: converged", rowNameTaken},
		{"reservation-deleted", "the reservation deleted by hand mid-life, five times, with a rival fleet waiting for the bucket",
			"re-bound to the running fleet each time; the rival never bound and stays BucketReserved", rowReservationDeleted},
		{"spec-refused", "running fleet given a placement the CRD schema accepts but the API server refuses in the workload",
			"Degraded=True SpecRefused quoting the API server, workload untouched, members kept; fixed: converged", rowSpecRefused},
		{"pod-settings", "running PersistentFleet given spec.pod (labels, annotations, env, pull secrets) naming a priority class that does not exist, and a CELLD_ variable",
			"Degraded=True PriorityClassMissing and SettingsOverridden=True, StatefulSet untouched, members kept; the class created: every member rolled to the settings, the operator's CELLD_ value kept", rowPodSettings},
		{"claim-deleted", "a running member's claim deleted by hand, then the member fails",
			"Degraded=True DiskLost while the member holds it; once it fails, VolumeLost heal after the grace period, new disk, converged", rowClaimDeleted},
	}
	var mu sync.Mutex
	seenBy := map[string]string{}
	start := time.Now()
	t.Cleanup(func() {
		var b strings.Builder
		fmt.Fprintf(&b, "%d rows in %s:\n", len(rows), time.Since(start).Round(time.Second))
		for _, r := range rows {
			fmt.Fprintf(&b, "  %-24s %s\n  %-24s -> %s\n  %-24s    seen: %s\n", r.name, r.state, "", r.outcome, "", orText(seenBy[r.name], "(not run)"))
		}
		t.Log(b.String())
	})
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			rowStart := time.Now()
			f := newFixture(t)
			op := f.startOperator()
			seen := "FAILED"
			defer func() {
				if t.Failed() {
					seen = "FAILED"
				}
				mu.Lock()
				seenBy[r.name] = fmt.Sprintf("%s (%s)", seen, time.Since(rowStart).Round(time.Second))
				mu.Unlock()
			}()
			seen = r.run(t, f, op)
		})
	}
}

func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// --- the rows ----------------------------------------------------------------------------------

func rowStorageClassMissing(t *testing.T, f *fixture, _ *operator) string {
	class := "celld-e2e-missing-" + f.id
	t.Cleanup(func() {
		_ = suite.kube.StorageV1().StorageClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	fl := f.newFleet("no-class", v1alpha1.ProfilePersistentFleet, 1)
	fl.Spec.Storage.StorageClassName = class
	fl = f.create(fl)
	got := f.waitDegraded(fl.Name, machine.ReasonStorageClassMissing, class, "spec.storage.storageClassName")
	f.holds(3*time.Second, "no workload and no claim while the class is missing", func() error {
		if _, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("statefulset %s: %v; want none", fl.Name, err)
		}
		if l := f.claimsOf(fl); len(l) != 0 {
			return fmt.Errorf("claims %v; want none", l)
		}
		return nil
	})
	// The local cluster provisions only kwok-volume: the new class lifts the hold, and the member
	// then waits for a volume, which is the cluster's business, not the operator's.
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "e2e.celld.io/none"}
	if _, err := suite.kube.StorageV1().StorageClasses().Create(f.ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFleet(fl.Name, time.Minute, "hold lifted: Degraded=False and a StatefulSet", func(cur *v1alpha1.CelldFleet) bool {
		if condition(cur, v1alpha1.ConditionDegraded).Status != metav1.ConditionFalse {
			return false
		}
		_, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
		return err == nil
	})
	return got
}

func rowServiceAccountMissing(t *testing.T, f *fixture, op *operator) string {
	fl := f.create(f.newFleet("no-account", v1alpha1.ProfileBucket, 2))
	f.waitConverged(fl.Name)
	before, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := f.recordPods()
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.ServiceAccountName = "celld-runtime" })
	got := f.waitDegraded(fl.Name, machine.ReasonServiceAccountMissing, "celld-runtime", "spec.serviceAccountName")
	f.holds(3*time.Second, "the last good workload kept", func() error {
		after, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if after.Generation != before.Generation || after.Spec.Template.Spec.ServiceAccountName != before.Spec.Template.Spec.ServiceAccountName {
			return fmt.Errorf("workload changed: generation %d->%d, serviceAccountName %q", before.Generation, after.Generation, after.Spec.Template.Spec.ServiceAccountName)
		}
		return f.readyMembers(fl, 2)
	})
	f.noDeletions(pods, "member Pods")

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "celld-runtime"}}
	if _, err := suite.kube.CoreV1().ServiceAccounts(f.ns).Create(f.ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFleet(fl.Name, converge, "rolled out to the new ServiceAccount", func(cur *v1alpha1.CelldFleet) bool {
		if !converged(cur) || condition(cur, v1alpha1.ConditionDegraded).Status != metav1.ConditionFalse {
			return false
		}
		for _, p := range f.members(cur) {
			if p.Spec.ServiceAccountName != "celld-runtime" || !podReady(&p) || p.DeletionTimestamp != nil {
				return false
			}
		}
		return len(f.members(cur)) == 2
	})
	f.noHeals(op)
	return got
}

func rowBucketReserved(t *testing.T, f *fixture, op *operator) string {
	owner := f.create(f.newFleet("owner", v1alpha1.ProfileBucket, 1))
	f.waitConverged(owner.Name)
	pods := f.recordPods()
	rival := f.newFleet("rival", v1alpha1.ProfileBucket, 1)
	rival.Spec.Bucket = owner.Spec.Bucket
	rival = f.create(rival)
	fl := f.waitFleet(rival.Name, time.Minute, "refused", bucketRefused)
	got := fmt.Sprintf("Degraded=True %s: %s", condition(fl, v1alpha1.ConditionDegraded).Reason, condition(fl, v1alpha1.ConditionDegraded).Message)
	t.Log(got)
	if msg := condition(fl, v1alpha1.ConditionDegraded).Message; !strings.Contains(msg, owner.Name) || !strings.Contains(msg, "choose another bucket") {
		t.Errorf("message %q: want the owner named and what to do", msg)
	}
	f.holds(3*time.Second, "the rival gets nothing", func() error { return f.refusedGetsNothing(rival) })
	if r := f.reservation(owner); r.Spec.FleetUID != owner.UID {
		t.Errorf("reservation bound to %s; want the owner %s", r.Spec.FleetUID, owner.UID)
	}
	f.waitConverged(owner.Name)
	f.noDeletions(pods, "member Pods")
	f.noHeals(op)
	return got
}

func rowForeignDisks(t *testing.T, f *fixture, _ *operator) string {
	const name = "foreign"
	claim := f.createClaim("data-"+name+"-0", map[string]string{
		kinds.LabelName: kinds.AppName, kinds.LabelInstance: name, kinds.LabelManagedBy: kinds.ManagedBy,
		kinds.LabelFleetUID: "00000000-0000-0000-0000-00000000f00d",
	})
	claims := f.recordClaims()
	fl := f.create(f.newFleet(name, v1alpha1.ProfilePersistentFleet, 2))
	got := f.waitDegraded(fl.Name, machine.ReasonForeignDisks, claim.Name, "delete or relabel")
	f.holds(3*time.Second, "no workload over another fleet's disk", func() error {
		if _, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("statefulset %s: %v; want none", fl.Name, err)
		}
		return nil
	})
	cur, err := f.fleets().Get(f.ctx, fl.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cur.Status.Disks; d == nil || !slices.Contains(d.Foreign, claim.Name) {
		t.Errorf("status.disks %+v: want %s among the foreign disks", d, claim.Name)
	}
	f.noDeletions(claims, "claims")

	if err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Delete(f.ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cur = f.waitConverged(fl.Name)
	for uid := range f.claimsOf(cur) {
		if uid == claim.UID {
			t.Errorf("the foreign claim %s is among the fleet's", claim.Name)
		}
	}
	return got
}

func rowMemberNeverReady(t *testing.T, f *fixture, op *operator) string {
	const grace = 10 * time.Second
	fl := f.newFleet("never-ready", v1alpha1.ProfileBucket, 3)
	fl.Spec.Healing.UnreachableGracePeriod = duration(grace)
	fl.Spec.Capacity.ScaleInStabilization = duration(0)
	fl = f.create(fl)
	fl = f.waitConverged(fl.Name)
	old := f.members(fl)
	pods := f.recordPods()

	// kwok makes every scheduled Pod ready whatever its image, and its stages cannot be changed
	// without restarting it: a CPU request no node can meet keeps the new member Pending, never
	// ready, as an image that never starts would.
	broke := time.Now()
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) {
		fl.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1000")
	})
	cur := f.waitFleet(fl.Name, time.Minute+grace, "Degraded=True and Progressing=False, reason MemberStuck", func(cur *v1alpha1.CelldFleet) bool {
		d, p := condition(cur, v1alpha1.ConditionDegraded), condition(cur, v1alpha1.ConditionProgressing)
		return cur.Status.ObservedGeneration == cur.Generation && d.Status == metav1.ConditionTrue && d.Reason == machine.ReasonMemberStuck &&
			p.Status == metav1.ConditionFalse && p.Reason == machine.ReasonMemberStuck
	})
	deg := condition(cur, v1alpha1.ConditionDegraded)
	got := fmt.Sprintf("Degraded=True %s after %s: %s", deg.Reason, time.Since(broke).Round(time.Second), deg.Message)
	t.Log(got)
	for _, want := range []string{"kubectl describe pod", "spec.image or spec.resources"} {
		if !strings.Contains(deg.Message, want) {
			t.Errorf("message %q lacks %q", deg.Message, want)
		}
	}
	// A scale-in requested now must wait: a member is not ready.
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 2 })
	f.holds(grace, "no heal, no scale-in, the old members kept and ready", func() error {
		d, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 3 {
			return fmt.Errorf("deployment replicas %d while a member is not ready; want 3", *d.Spec.Replicas)
		}
		if total, by := op.heals(t); total != 0 {
			return fmt.Errorf("heals_total %g%s", total, formatSeries(by))
		}
		return f.podsReady(old)
	})
	f.noDeletions(pods, "member Pods")

	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) {
		fl.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("100m")
		fl.Spec.Members = 3
	})
	f.waitFleet(fl.Name, converge, "converged, Degraded=False", func(cur *v1alpha1.CelldFleet) bool {
		return converged(cur) && condition(cur, v1alpha1.ConditionDegraded).Status == metav1.ConditionFalse
	})
	if err := f.podsReady(old); err != nil {
		t.Errorf("after the fix: %v", err)
	}
	f.noHeals(op)
	return got
}

func rowWorkloadReplicasEdited(t *testing.T, f *fixture, op *operator) string {
	fl := f.newFleet("replicas", v1alpha1.ProfilePersistentFleet, 3)
	fl.Spec.Capacity.ScaleInStabilization = duration(0)
	fl = f.create(fl)
	fl = f.waitConverged(fl.Name)
	disks := f.claimsOf(fl)
	claims, sets := f.recordClaims(), f.recordStatefulSets()

	scale := func(n int) {
		t.Helper()
		if _, err := suite.kube.AppsV1().StatefulSets(f.ns).Patch(f.ctx, fl.Name, types.MergePatchType,
			[]byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// steps waits until the recorder saw these changes of spec.replicas, in order, and the
	// StatefulSet rolled out at 3 after them.
	steps := func(want ...string) []string {
		t.Helper()
		var got []string
		sets.Await(t, "spec.replicas "+strings.Join(want, ", ")+", rolled out at 3", func(evs []seen) bool {
			got = got[:0]
			for _, c := range statefulSetChanges(evs, fl.Name) {
				got = append(got, fmt.Sprintf("%d->%d", c.from, c.to))
			}
			return slices.Equal(got, want) && rolledOutAt(fl.Name, 3)(evs)
		})
		return got
	}
	victim := f.members(fl)[2]
	scale(2)
	edited := time.Now()
	steps("3->2", "2->3")
	down := time.Since(edited).Round(100 * time.Millisecond)
	f.waitFleet(fl.Name, converge, "converged at 3 members", func(cur *v1alpha1.CelldFleet) bool {
		return converged(cur) && len(f.members(cur)) == 3
	})
	if p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, victim.Name, metav1.GetOptions{}); err != nil || p.UID == victim.UID || !podReady(p) {
		t.Errorf("member %s: %v; want a new Pod, ready, in place of the one the hand scale-down removed", victim.Name, err)
	}
	if got := f.claimsOf(fl); !reflect.DeepEqual(got, disks) {
		t.Errorf("claims after the hand scale-down: %v; want the same three as before %v", got, disks)
	}

	scale(4)
	edited = time.Now()
	got := steps("3->2", "2->3", "3->4", "4->3")
	up := time.Since(edited).Round(100 * time.Millisecond)
	f.waitFleet(fl.Name, converge, "converged at 3 members after a hand scale-up", func(cur *v1alpha1.CelldFleet) bool {
		return converged(cur) && len(f.members(cur)) == 3
	})
	t.Logf("spec.replicas changes: %s", strings.Join(got, ", "))
	f.noDeletions(claims, "claims")
	extra := "data-" + fl.Name + "-3"
	cur := f.waitFleet(fl.Name, time.Minute, "the extra member's disk kept and listed unused", func(cur *v1alpha1.CelldFleet) bool {
		return cur.Status.Disks != nil && slices.Contains(cur.Status.Disks.Unused, extra)
	})
	f.noHeals(op)
	return fmt.Sprintf("3->2 by hand: grown back and rolled out %s later on the same 3 disks; 3->4 by hand: shrunk back in one step and rolled out %s later, disk %s kept (status.disks.unused %v)",
		down, up, extra, cur.Status.Disks.Unused)
}

func rowWorkloadImageEdited(t *testing.T, f *fixture, op *operator) string {
	fl := f.create(f.newFleet("image", v1alpha1.ProfileBucket, 2))
	f.waitConverged(fl.Name)
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":%q,"image":"ghcr.io/celld/celld:hand-edit"}]}}}}`, render.ContainerName)
	edited, err := suite.kube.AppsV1().Deployments(f.ns).Patch(f.ctx, fl.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var repaired *appsv1.Deployment
	f.waitFleet(fl.Name, converge, "the image repaired and rolled out", func(cur *v1alpha1.CelldFleet) bool {
		d, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
		if err != nil || d.Generation <= edited.Generation || d.Spec.Template.Spec.Containers[0].Image != image {
			return false
		}
		repaired = d
		for _, p := range f.members(cur) {
			if p.Spec.Containers[0].Image != image {
				return false
			}
		}
		return converged(cur)
	})
	f.noHeals(op)
	return fmt.Sprintf("image back to %s at generation %d (hand edit at %d), converged %s after the edit",
		repaired.Spec.Template.Spec.Containers[0].Image, repaired.Generation, edited.Generation, time.Since(start).Round(time.Second))
}

func rowOwnedObjectsEdited(t *testing.T, f *fixture, op *operator) string {
	fl := f.create(f.newFleet("edited", v1alpha1.ProfileBucket, 2))
	f.waitConverged(fl.Name)
	before := f.ownedSpecs(fl)
	pods := f.recordPods()
	patches := []struct {
		kind, name string
		pt         types.PatchType
		body       string
	}{
		{"service", fl.Name, types.JSONPatchType, `[{"op":"replace","path":"/spec/ports/0/port","value":9999}]`},
		{"service", fl.Name + "-peers", types.JSONPatchType, `[{"op":"remove","path":"/metadata/labels/app.kubernetes.io~1managed-by"}]`},
		{"poddisruptionbudget", fl.Name, types.MergePatchType, `{"spec":{"maxUnavailable":3}}`},
		{"networkpolicy", fl.Name + "-peers", types.JSONPatchType, `[{"op":"replace","path":"/spec/ingress","value":[{}]}]`},
	}
	for _, p := range patches {
		var err error
		switch p.kind {
		case "service":
			_, err = suite.kube.CoreV1().Services(f.ns).Patch(f.ctx, p.name, p.pt, []byte(p.body), metav1.PatchOptions{})
		case "poddisruptionbudget":
			_, err = suite.kube.PolicyV1().PodDisruptionBudgets(f.ns).Patch(f.ctx, p.name, p.pt, []byte(p.body), metav1.PatchOptions{})
		case "networkpolicy":
			_, err = suite.kube.NetworkingV1().NetworkPolicies(f.ns).Patch(f.ctx, p.name, p.pt, []byte(p.body), metav1.PatchOptions{})
		}
		if err != nil {
			t.Fatalf("edit %s %s: %v", p.kind, p.name, err)
		}
	}
	start := time.Now()
	var last []string
	err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(context.Context) (bool, error) {
		last = diffSpecs(before, f.ownedSpecs(fl))
		return len(last) == 0, nil
	})
	if err != nil {
		t.Fatalf("not repaired within a minute: %s", strings.Join(last, "; "))
	}
	took := time.Since(start).Round(100 * time.Millisecond)
	f.waitConverged(fl.Name)
	f.noDeletions(pods, "member Pods")
	f.noHeals(op)
	return fmt.Sprintf("%d hand edits repaired in %s", len(patches), took)
}

func rowOwnedObjectsDeleted(t *testing.T, f *fixture, op *operator) string {
	fl := f.create(f.newFleet("deleted", v1alpha1.ProfilePersistentFleet, 2))
	f.waitConverged(fl.Name)
	before := f.ownedSpecs(fl)
	uids := f.ownedUIDs(fl)
	pods, claims := f.recordPods(), f.recordClaims()
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	for _, name := range []string{fl.Name, fl.Name + "-peers"} {
		if err := suite.kube.CoreV1().Services(f.ns).Delete(f.ctx, name, opts); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{fl.Name + "-clients", fl.Name + "-peers"} {
		if err := suite.kube.NetworkingV1().NetworkPolicies(f.ns).Delete(f.ctx, name, opts); err != nil {
			t.Fatal(err)
		}
	}
	if err := suite.kube.PolicyV1().PodDisruptionBudgets(f.ns).Delete(f.ctx, fl.Name, opts); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var last []string
	err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(context.Context) (bool, error) {
		now := f.ownedUIDs(fl)
		last = diffSpecs(before, f.ownedSpecs(fl))
		for k, uid := range uids {
			if now[k] == "" || now[k] == uid {
				last = append(last, k+" not re-created")
			}
		}
		return len(last) == 0, nil
	})
	if err != nil {
		t.Fatalf("not re-created within a minute: %s", strings.Join(last, "; "))
	}
	took := time.Since(start).Round(100 * time.Millisecond)
	f.waitConverged(fl.Name)
	f.noDeletions(pods, "member Pods")
	f.noDeletions(claims, "claims")
	f.noHeals(op)
	return fmt.Sprintf("%d objects re-created in %s", len(uids), took)
}

func rowWorkloadOrphaned(t *testing.T, f *fixture, op *operator) string {
	persistent := f.create(f.newFleet("orphaned-sts", v1alpha1.ProfilePersistentFleet, 3))
	bucket := f.create(f.newFleet("orphaned-deploy", v1alpha1.ProfileBucket, 2))
	type before struct {
		fl      *v1alpha1.CelldFleet
		uid     types.UID
		members []corev1.Pod
		disks   map[types.UID]string
	}
	var fleets []before
	for _, fl := range []*v1alpha1.CelldFleet{persistent, bucket} {
		fl = f.waitConverged(fl.Name)
		b := before{fl: fl, members: f.members(fl), disks: f.claimsOf(fl)}
		if fl.Spec.Profile == v1alpha1.ProfilePersistentFleet {
			b.uid = f.statefulSet(fl.Name).UID
		} else {
			d, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b.uid = d.UID
		}
		fleets = append(fleets, b)
	}
	pods, claims := f.recordPods(), f.recordClaims()
	// kubectl delete --cascade=orphan: the members (and a Deployment's ReplicaSet) stay, ownerless.
	orphan := metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationOrphan)}
	if err := suite.kube.AppsV1().StatefulSets(f.ns).Delete(f.ctx, persistent.Name, orphan); err != nil {
		t.Fatal(err)
	}
	if err := suite.kube.AppsV1().Deployments(f.ns).Delete(f.ctx, bucket.Name, orphan); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var out []string
	for _, b := range fleets {
		kind := "StatefulSet"
		var now types.UID
		f.waitFleet(b.fl.Name, converge, "a new workload that adopted the members", func(cur *v1alpha1.CelldFleet) bool {
			if !converged(cur) {
				return false
			}
			var m metav1.Object
			var err error
			if b.fl.Spec.Profile == v1alpha1.ProfilePersistentFleet {
				m, err = suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, b.fl.Name, metav1.GetOptions{})
			} else {
				kind = "Deployment"
				m, err = suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, b.fl.Name, metav1.GetOptions{})
			}
			if err != nil || m.GetUID() == b.uid {
				return false
			}
			now = m.GetUID()
			return f.controlledBy(f.members(cur), now) == nil
		})
		if err := f.podsReady(b.members); err != nil {
			t.Error(err)
		}
		if got := f.claimsOf(b.fl); !reflect.DeepEqual(got, b.disks) {
			t.Errorf("claims of %s %v; want the same as before %v", b.fl.Name, got, b.disks)
		}
		out = append(out, fmt.Sprintf("%s re-created and adopted the same %d Pods (%d claims)", kind, len(b.members), len(b.disks)))
	}
	took := time.Since(start).Round(100 * time.Millisecond)
	f.noDeletions(pods, "member Pods")
	f.noDeletions(claims, "claims")
	f.noHeals(op)
	return strings.Join(out, "; ") + fmt.Sprintf(", both within %s", took)
}

// controlledBy: every Pod is controlled by the workload uid, directly (a StatefulSet) or through
// a ReplicaSet (a Deployment).
func (f *fixture) controlledBy(pods []corev1.Pod, uid types.UID) error {
	for _, p := range pods {
		ref := metav1.GetControllerOf(&p)
		if ref != nil && ref.Kind == "ReplicaSet" {
			rs, err := suite.kube.AppsV1().ReplicaSets(f.ns).Get(f.ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			ref = metav1.GetControllerOf(rs)
		}
		if ref == nil || ref.UID != uid {
			return fmt.Errorf("member %s controlled by %v; want %s", p.Name, ref, uid)
		}
	}
	return nil
}

func rowNameTaken(t *testing.T, f *fixture, _ *operator) string {
	const name = "taken"
	zero := int32(0)
	labels := map[string]string{"app": "someone-else"}
	theirs, err := suite.kube.AppsV1().Deployments(f.ns).Create(f.ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fl := f.create(f.newFleet(name, v1alpha1.ProfileBucket, 1))
	got := f.waitDegraded(fl.Name, machine.ReasonNameTaken, "Deployment/"+name, "never takes it over")
	f.holds(3*time.Second, "their Deployment untouched", func() error {
		d, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.UID != theirs.UID || d.Generation != theirs.Generation || len(d.OwnerReferences) != 0 || !reflect.DeepEqual(d.Labels, labels) {
			return fmt.Errorf("deployment %s changed: uid %s generation %d owners %v labels %v", name, d.UID, d.Generation, d.OwnerReferences, d.Labels)
		}
		return nil
	})
	if err := suite.kube.AppsV1().Deployments(f.ns).Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cur := f.waitConverged(fl.Name)
	d, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(d); ref == nil || ref.UID != cur.UID {
		t.Errorf("deployment %s controlled by %v; want the fleet once theirs is gone", name, ref)
	}
	return got
}

func rowReservationDeleted(t *testing.T, f *fixture, op *operator) string {
	owner := f.create(f.newFleet("owner", v1alpha1.ProfileBucket, 2))
	f.waitConverged(owner.Name)
	rival := f.newFleet("rival", v1alpha1.ProfileBucket, 1)
	rival.Spec.Bucket = owner.Spec.Bucket
	rival = f.create(rival)
	f.waitFleet(rival.Name, time.Minute, "refused", bucketRefused)
	pods := f.recordPods()
	rc := suite.celld.CelldV1alpha1().CelldReservations(f.ns)
	reservations := f.record("celldreservations", func(ctx context.Context) (runtime.Object, error) { return rc.List(ctx, metav1.ListOptions{}) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return rc.Watch(ctx, o) })

	var took []string
	for i := 0; i < 5; i++ {
		r := f.reservation(owner)
		if err := rc.Delete(f.ctx, r.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		var again *v1alpha1.CelldReservation
		err := wait.PollUntilContextTimeout(f.ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := rc.Get(ctx, r.Name, metav1.GetOptions{})
			if err != nil || got.UID == r.UID {
				return false, nil
			}
			again = got
			return true, nil
		})
		if err != nil {
			t.Fatalf("reservation %s not re-created within a minute", r.Name)
		}
		took = append(took, time.Since(deleted).Round(10*time.Millisecond).String())
		if again.Spec.FleetUID != owner.UID {
			t.Errorf("deletion %d: reservation re-created bound to %s (%s); want the running owner %s", i+1, again.Spec.FleetName, again.Spec.FleetUID, owner.UID)
		}
		f.waitFleet(rival.Name, time.Minute, "still refused", bucketRefused)
		if err := f.refusedGetsNothing(rival); err != nil {
			t.Error(err)
		}
	}
	f.waitConverged(owner.Name)
	for _, e := range reservations.Events(t) {
		if r, ok := e.Obj.(*v1alpha1.CelldReservation); ok && e.Type != watch.Deleted && r.Spec.FleetUID != owner.UID {
			t.Errorf("reservation %s was bound to %s (%s) at resource version %s: the bucket changed hands", r.Name, r.Spec.FleetName, r.Spec.FleetUID, r.ResourceVersion)
		}
	}
	fl, err := f.fleets().Get(f.ctx, rival.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.noDeletions(pods, "member Pods")
	f.noHeals(op)
	return fmt.Sprintf("re-bound to the owner %s after each deletion; the rival: %s", strings.Join(took, ", "), condition(fl, v1alpha1.ConditionDegraded).Message)
}

func rowClaimDeleted(t *testing.T, f *fixture, op *operator) string {
	const grace = 10 * time.Second
	fl := f.newFleet("claim", v1alpha1.ProfilePersistentFleet, 3)
	fl.Spec.Healing.UnreachableGracePeriod = duration(grace)
	fl = f.create(fl)
	fl = f.waitConverged(fl.Name)
	victim := f.members(fl)[1]
	doomed := "data-" + victim.Name
	disk, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Get(f.ctx, doomed, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	disks := f.claimsOf(fl)
	pods, claims := f.recordPods(), f.recordClaims()

	if err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Delete(f.ctx, doomed, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got := f.waitDegraded(fl.Name, machine.ReasonDiskLost, doomed, "copy off what must be kept")
	// The member still runs on its disk (pvc-protection keeps the claim while a Pod uses it):
	// nothing to replace yet.
	f.holds(grace+2*time.Second, "the member keeps running on its disk", func() error {
		if total, by := op.heals(t); total != 0 {
			return fmt.Errorf("heals_total %g%s", total, formatSeries(by))
		}
		return f.podsReady([]corev1.Pod{victim})
	})
	f.noDeletions(pods, "member Pods")

	// The member fails, as one whose disk is going away would: kwok leaves a Running Pod's status
	// alone, so a Ready=False condition written by hand stays.
	failed := time.Now()
	status := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"E2EDiskGone","lastTransitionTime":%q}]}}`,
		failed.UTC().Format(time.RFC3339))
	if _, err := suite.kube.CoreV1().Pods(f.ns).Patch(f.ctx, victim.Name, types.StrategicMergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	f.waitFleet(fl.Name, converge, "member replaced on a new disk", func(cur *v1alpha1.CelldFleet) bool {
		if !converged(cur) || condition(cur, v1alpha1.ConditionDegraded).Status != metav1.ConditionFalse {
			return false
		}
		c, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Get(f.ctx, doomed, metav1.GetOptions{})
		if err != nil || c.UID == disk.UID {
			return false
		}
		p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, victim.Name, metav1.GetOptions{})
		return err == nil && p.UID != victim.UID && podReady(p)
	})
	dels := deletions(pods.Await(t, "the failed member gone", gone(victim.UID)))
	if d, ok := dels[victim.UID]; len(dels) != 1 || !ok {
		t.Errorf("Pods deleted: %v; want only %s (%s)", names(dels), victim.Name, victim.UID)
	} else if after := d.requested.Sub(failed); after < grace-time.Second {
		t.Errorf("%s deleted %s after it failed, before the grace period of %s", victim.Name, after, grace)
	}
	for uid, d := range deletions(claims.Events(t)) {
		if uid != disk.UID {
			t.Errorf("claim %s (%s) deleted: only %s was deleted, by hand", d.name, uid, doomed)
		}
	}
	for uid, name := range disks {
		if name == doomed {
			continue
		}
		if c, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Get(f.ctx, name, metav1.GetOptions{}); err != nil || c.UID != uid {
			t.Errorf("claim %s: %v; want the same claim (%s) as before", name, err, uid)
		}
	}
	if total, by := op.heals(t); total != 1 || by[`{reason="VolumeLost"}`] != 1 {
		t.Errorf("heals_total: %g%s; want one VolumeLost", total, formatSeries(by))
	}
	return fmt.Sprintf("%s; after the member failed: healed (VolumeLost) and converged on a new disk %s later", got, time.Since(failed).Round(time.Second))
}

func rowSpecRefused(t *testing.T, f *fixture, op *operator) string {
	fl := f.create(f.newFleet("refused", v1alpha1.ProfileBucket, 2))
	f.waitConverged(fl.Name)
	before, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := f.recordPods()
	// An In requirement without values: the fleet's schema takes the Kubernetes affinity type as
	// it is, the Deployment's validation refuses it.
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) {
		fl.Spec.Placement.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "e2e.celld.io/zone", Operator: corev1.NodeSelectorOpIn}},
			}}},
		}}
	})
	got := f.waitDegraded(fl.Name, machine.ReasonSpecRefused, "Deployment/refused as rendered", "values", "fix the fleet's spec")
	f.holds(3*time.Second, "the last good workload kept", func() error {
		after, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if after.Generation != before.Generation {
			return fmt.Errorf("workload changed: generation %d->%d", before.Generation, after.Generation)
		}
		return f.readyMembers(fl, 2)
	})
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Placement.Affinity = nil })
	f.waitFleet(fl.Name, converge, "converged, Degraded=False", func(cur *v1alpha1.CelldFleet) bool {
		return converged(cur) && condition(cur, v1alpha1.ConditionDegraded).Status == metav1.ConditionFalse
	})
	f.noDeletions(pods, "member Pods")
	f.noHeals(op)
	return got
}

// --- helpers -----------------------------------------------------------------------------------

// waitDegraded waits for Degraded=True with reason on the fleet's current generation, checks that
// the message says each of the words (the object, what to do), and returns what it said.
func (f *fixture) waitDegraded(name, reason string, says ...string) string {
	f.t.Helper()
	fl := f.waitFleet(name, time.Minute, "Degraded=True, reason "+reason, func(fl *v1alpha1.CelldFleet) bool {
		c := condition(fl, v1alpha1.ConditionDegraded)
		return fl.Status.ObservedGeneration == fl.Generation && c.Status == metav1.ConditionTrue && c.Reason == reason
	})
	c := condition(fl, v1alpha1.ConditionDegraded)
	for _, s := range says {
		if !strings.Contains(c.Message, s) {
			f.t.Errorf("Degraded message %q does not say %q", c.Message, s)
		}
	}
	if r := condition(fl, v1alpha1.ConditionReady); r.Status != metav1.ConditionFalse && reason != machine.ReasonDiskLost {
		f.t.Errorf("Ready=%s while Degraded %s; want False", r.Status, reason)
	}
	msg := fmt.Sprintf("Degraded=True %s: %s", reason, c.Message)
	f.t.Log(msg)
	return msg
}

func bucketRefused(fl *v1alpha1.CelldFleet) bool {
	bound, degraded := condition(fl, v1alpha1.ConditionReservationBound), condition(fl, v1alpha1.ConditionDegraded)
	return fl.Status.ObservedGeneration == fl.Generation &&
		bound.Status == metav1.ConditionFalse && bound.Reason == machine.ReasonBucketReserved &&
		degraded.Status == metav1.ConditionTrue && degraded.Reason == machine.ReasonBucketReserved
}

// refusedGetsNothing: a fleet refused its bucket has no workload, no member and no finalizer.
func (f *fixture) refusedGetsNothing(fl *v1alpha1.CelldFleet) error {
	if _, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("deployment %s: %v; want none", fl.Name, err)
	}
	if pods := f.members(fl); len(pods) != 0 {
		return fmt.Errorf("%d members of the refused fleet; want none", len(pods))
	}
	cur, err := f.fleets().Get(f.ctx, fl.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if slices.Contains(cur.Finalizers, v1alpha1.FleetFinalizer) {
		return fmt.Errorf("the refused fleet %s carries the finalizer", fl.Name)
	}
	return nil
}

// noDeletions fails the test if the recorder saw any of its objects deleted.
func (f *fixture) noDeletions(r *recorder, what string) {
	f.t.Helper()
	if dels := deletions(r.Events(f.t)); len(dels) != 0 {
		f.t.Errorf("%s deleted: %v; want none", what, names(dels))
	}
}

func (f *fixture) noHeals(op *operator) {
	f.t.Helper()
	if total, by := op.heals(f.t); total != 0 {
		f.t.Errorf("heals_total %g%s; want none", total, formatSeries(by))
	}
}

func (f *fixture) readyMembers(fl *v1alpha1.CelldFleet, n int) error {
	ready := 0
	for _, p := range f.members(fl) {
		if podReady(&p) && p.DeletionTimestamp == nil {
			ready++
		}
	}
	if ready != n {
		return fmt.Errorf("%d ready members; want %d", ready, n)
	}
	return nil
}

// podsReady: each of these Pods still exists, the same Pod (UID), ready and not terminating.
func (f *fixture) podsReady(pods []corev1.Pod) error {
	for _, want := range pods {
		p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("member %s: %v", want.Name, err)
		}
		if p.UID != want.UID || !podReady(p) || p.DeletionTimestamp != nil {
			return fmt.Errorf("member %s: uid %s ready %t terminating %t; want %s ready", want.Name, p.UID, podReady(p), p.DeletionTimestamp != nil, want.UID)
		}
	}
	return nil
}

// claimsOf maps the fleet's claims (by its UID label) to their names.
func (f *fixture) claimsOf(fl *v1alpha1.CelldFleet) map[types.UID]string {
	f.t.Helper()
	l, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).List(f.ctx, metav1.ListOptions{LabelSelector: memberSelector(fl)})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[types.UID]string{}
	for _, c := range l.Items {
		out[c.UID] = c.Name
	}
	return out
}

func (f *fixture) createClaim(name string, labels map[string]string) *corev1.PersistentVolumeClaim {
	f.t.Helper()
	sc := "kwok-volume"
	c, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Create(f.ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// ownedSpecs are the fields the operator sets on the fleet's Services, PodDisruptionBudget and
// NetworkPolicies, by kind/name; a missing object is absent from the map.
func (f *fixture) ownedSpecs(fl *v1alpha1.CelldFleet) map[string]string {
	f.t.Helper()
	out := map[string]string{}
	put := func(key string, o any) { out[key] = toYAML(o) }
	for _, name := range []string{fl.Name, fl.Name + "-peers"} {
		if s, err := suite.kube.CoreV1().Services(f.ns).Get(f.ctx, name, metav1.GetOptions{}); err == nil {
			put("Service/"+name, map[string]any{"ports": s.Spec.Ports, "selector": s.Spec.Selector, "labels": s.Labels,
				"publishNotReadyAddresses": s.Spec.PublishNotReadyAddresses})
		}
	}
	for _, name := range []string{fl.Name + "-clients", fl.Name + "-peers"} {
		if p, err := suite.kube.NetworkingV1().NetworkPolicies(f.ns).Get(f.ctx, name, metav1.GetOptions{}); err == nil {
			put("NetworkPolicy/"+name, map[string]any{"spec": p.Spec, "labels": p.Labels})
		}
	}
	if p, err := suite.kube.PolicyV1().PodDisruptionBudgets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{}); err == nil {
		put("PodDisruptionBudget/"+fl.Name, map[string]any{"maxUnavailable": p.Spec.MaxUnavailable, "selector": p.Spec.Selector, "labels": p.Labels})
	}
	return out
}

// ownedUIDs are the UIDs of the same objects, by kind/name.
func (f *fixture) ownedUIDs(fl *v1alpha1.CelldFleet) map[string]types.UID {
	f.t.Helper()
	out := map[string]types.UID{}
	for _, name := range []string{fl.Name, fl.Name + "-peers"} {
		if s, err := suite.kube.CoreV1().Services(f.ns).Get(f.ctx, name, metav1.GetOptions{}); err == nil && ownedByFleet(s, fl) {
			out["Service/"+name] = s.UID
		}
	}
	for _, name := range []string{fl.Name + "-clients", fl.Name + "-peers"} {
		if p, err := suite.kube.NetworkingV1().NetworkPolicies(f.ns).Get(f.ctx, name, metav1.GetOptions{}); err == nil && ownedByFleet(p, fl) {
			out["NetworkPolicy/"+name] = p.UID
		}
	}
	if p, err := suite.kube.PolicyV1().PodDisruptionBudgets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{}); err == nil && ownedByFleet(p, fl) {
		out["PodDisruptionBudget/"+fl.Name] = p.UID
	}
	return out
}

func ownedByFleet(o metav1.Object, fl *v1alpha1.CelldFleet) bool {
	ref := metav1.GetControllerOf(o)
	return ref != nil && ref.UID == fl.UID
}

// diffSpecs names what differs between two ownedSpecs.
func diffSpecs(want, got map[string]string) []string {
	var out []string
	for k, w := range want {
		switch g, ok := got[k]; {
		case !ok:
			out = append(out, k+" missing")
		case g != w:
			out = append(out, fmt.Sprintf("%s differs:\n%s\nwant:\n%s", k, g, w))
		}
	}
	sort.Strings(out)
	return out
}

func rowPodSettings(t *testing.T, f *fixture, op *operator) string {
	fl := f.create(f.newFleet("settings", v1alpha1.ProfilePersistentFleet, 2))
	f.waitConverged(fl.Name)
	before, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := f.recordPods()
	class := f.ns + "-critical"
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) {
		fl.Spec.Pod = v1alpha1.PodSettings{
			Labels:            map[string]v1alpha1.LabelValue{"team": "storage", "app.kubernetes.io/instance": "stolen"},
			Annotations:       map[string]v1alpha1.AnnotationValue{"example.com/owner": "platform"},
			PriorityClassName: class,
			ImagePullSecrets:  []v1alpha1.PullSecret{{Name: "regcred"}},
			Env:               []v1alpha1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}, {Name: "CELLD_BUCKET_NAME", Value: "stolen"}},
		}
	})
	got := f.waitDegraded(fl.Name, machine.ReasonPriorityClassMissing, class, "spec.pod.priorityClassName")
	cur, err := f.fleets().Get(f.ctx, fl.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := condition(cur, v1alpha1.ConditionSettingsOverridden); c.Status != metav1.ConditionTrue ||
		!strings.Contains(c.Message, "spec.pod.env CELLD_BUCKET_NAME") || !strings.Contains(c.Message, "spec.pod.labels app.kubernetes.io/instance") || strings.Contains(c.Message, "LOG_LEVEL") {
		t.Errorf("SettingsOverridden=%s %q: want True naming CELLD_BUCKET_NAME and app.kubernetes.io/instance, and not LOG_LEVEL", c.Status, c.Message)
	}
	f.holds(3*time.Second, "the last good workload kept", func() error {
		after, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if after.Generation != before.Generation || after.Spec.Template.Spec.PriorityClassName != "" {
			return fmt.Errorf("workload changed while the class is missing: generation %d->%d, priorityClassName %q", before.Generation, after.Generation, after.Spec.Template.Spec.PriorityClassName)
		}
		return f.readyMembers(fl, 2)
	})
	f.noDeletions(pods, "member Pods")

	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Value: 1000}
	if _, err := suite.kube.SchedulingV1().PriorityClasses().Create(f.ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = suite.kube.SchedulingV1().PriorityClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	var why string
	defer func() {
		if t.Failed() && why != "" {
			t.Logf("the members' Pod settings when the wait ended: %s", why)
		}
	}()
	f.waitFleet(fl.Name, converge, "every member rolled to the Pod settings", func(cur *v1alpha1.CelldFleet) bool {
		if !converged(cur) || condition(cur, v1alpha1.ConditionDegraded).Status != metav1.ConditionFalse {
			why = "not converged"
			return false
		}
		members := f.members(cur)
		if len(members) != 2 {
			why = fmt.Sprintf("%d members", len(members))
			return false
		}
		for _, p := range members {
			if why = podSettingsMissing(&p, cur, class); why != "" {
				return false
			}
		}
		return true
	})
	f.noHeals(op)
	return got
}

// podSettingsMissing says what of rowPodSettings' spec.pod a member Pod, as the API server holds
// it, lacks; empty when it has every setting and the operator's own values.
func podSettingsMissing(p *corev1.Pod, fl *v1alpha1.CelldFleet, class string) string {
	if !podReady(p) || p.DeletionTimestamp != nil {
		return p.Name + " not ready"
	}
	// The API server's priority admission resolves the class: the Pod carries its value.
	if p.Spec.PriorityClassName != class || p.Spec.Priority == nil || *p.Spec.Priority != 1000 {
		return fmt.Sprintf("%s: priorityClassName %q priority %v", p.Name, p.Spec.PriorityClassName, p.Spec.Priority)
	}
	if p.Labels["team"] != "storage" || p.Labels["app.kubernetes.io/instance"] != fl.Name || p.Annotations["example.com/owner"] != "platform" {
		return fmt.Sprintf("%s: labels %v annotations %v", p.Name, p.Labels, p.Annotations)
	}
	if len(p.Spec.ImagePullSecrets) != 1 || p.Spec.ImagePullSecrets[0].Name != "regcred" {
		return fmt.Sprintf("%s: imagePullSecrets %v", p.Name, p.Spec.ImagePullSecrets)
	}
	env := map[string][]string{}
	for _, e := range p.Spec.Containers[0].Env {
		env[e.Name] = append(env[e.Name], e.Value)
	}
	if !slices.Equal(env["LOG_LEVEL"], []string{"debug"}) || !slices.Equal(env["CELLD_BUCKET_NAME"], []string{fl.Spec.Bucket.Name}) {
		return fmt.Sprintf("%s: LOG_LEVEL %v CELLD_BUCKET_NAME %v", p.Name, env["LOG_LEVEL"], env["CELLD_BUCKET_NAME"])
	}
	return ""
}
