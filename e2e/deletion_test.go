package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestPersistentFleetDeletion: deleting a PersistentFleet stops its members first, then deletes
// exactly its own disks, then releases the fleet; the reservation stays, and another fleet's disk
// and a look-alike disk in the same namespace are untouched.
func TestPersistentFleetDeletion(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startOperator()
	doomed := f.create(f.newFleet("doomed", v1alpha1.ProfilePersistentFleet, 3))
	bystander := f.create(f.newFleet("bystander", v1alpha1.ProfilePersistentFleet, 1))
	f.waitConverged(doomed.Name)
	f.waitConverged(bystander.Name)

	claimsOf := func(fl *v1alpha1.CelldFleet) map[types.UID]string {
		l, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).List(f.ctx, metav1.ListOptions{LabelSelector: memberSelector(fl)})
		if err != nil {
			t.Fatal(err)
		}
		out := map[types.UID]string{}
		for _, c := range l.Items {
			out[c.UID] = c.Name
		}
		return out
	}
	own, other := claimsOf(doomed), claimsOf(bystander)
	if len(own) != 3 || len(other) != 1 {
		t.Fatalf("claims: doomed %v, bystander %v; want 3 and 1", own, other)
	}
	// A claim named like the doomed fleet's next member's, but not its own: the operator goes by
	// the fleet's UID label, never by name.
	sc := "kwok-volume"
	lookAlike, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Create(f.ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-doomed-9"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	members := map[types.UID]string{}
	for _, p := range f.members(doomed) {
		members[p.UID] = p.Name
	}
	pods, claims, fleets := f.recordPods(), f.recordClaims(), f.recordFleets()

	f.deleteFleet(doomed.Name, true)

	var memberUIDs, claimUIDs []types.UID
	for uid := range members {
		memberUIDs = append(memberUIDs, uid)
	}
	for uid := range own {
		claimUIDs = append(claimUIDs, uid)
	}
	podDels := deletions(pods.Await(t, "the members gone", gone(memberUIDs...)))
	claimDels := deletions(claims.Await(t, "the fleet's claims gone", gone(claimUIDs...)))
	// Ordered by resource version (see deletion), logged in time.
	var lastMember, lastClaim deletion
	for _, uid := range memberUIDs {
		if d := podDels[uid]; d.goneRV > lastMember.goneRV {
			lastMember = d
		}
	}
	var firstClaim deletion
	for uid, d := range claimDels {
		if _, ok := own[uid]; !ok {
			t.Errorf("claim %s (%s) deleted: not the doomed fleet's", d.name, uid)
			continue
		}
		if d.requestedRV < lastMember.goneRV {
			t.Errorf("claim %s deleted (resource version %d) before the last member was gone (%d)", d.name, d.requestedRV, lastMember.goneRV)
		}
		if d.goneRV > lastClaim.goneRV {
			lastClaim = d
		}
		if firstClaim.name == "" || d.requestedRV < firstClaim.requestedRV {
			firstClaim = d
		}
	}
	released := deletions(fleets.Await(t, "the fleet gone", gone(doomed.UID)))[doomed.UID]
	if released.goneRV < lastClaim.goneRV {
		t.Errorf("fleet released (resource version %d) before its last claim was gone (%d)", released.goneRV, lastClaim.goneRV)
	}
	t.Logf("members gone, then claims deleted %s later, then the fleet gone %s after the last claim",
		firstClaim.requested.Sub(lastMember.gone).Round(10*time.Millisecond), released.gone.Sub(lastClaim.gone).Round(10*time.Millisecond))

	for uid, name := range other {
		c, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Get(f.ctx, name, metav1.GetOptions{})
		if err != nil || c.UID != uid || c.DeletionTimestamp != nil {
			t.Errorf("the bystander's claim %s: %v, uid %s, deletionTimestamp %v; want untouched", name, err, c.UID, c.DeletionTimestamp)
		}
	}
	if c, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Get(f.ctx, lookAlike.Name, metav1.GetOptions{}); err != nil || c.UID != lookAlike.UID || c.DeletionTimestamp != nil {
		t.Errorf("look-alike claim %s: %v; want untouched", lookAlike.Name, err)
	}
	if r := f.reservation(doomed); r.Spec.FleetUID != doomed.UID || r.DeletionTimestamp != nil {
		t.Errorf("reservation %s: bound to %s, deletionTimestamp %v; want it kept, bound to the deleted fleet %s", r.Name, r.Spec.FleetUID, r.DeletionTimestamp, doomed.UID)
	}
	f.waitConverged(bystander.Name)
}

// TestReservedBucket: a second fleet naming a bucket reserved to another fleet is refused with a
// condition and gets no workload, even after the owner is deleted; only deleting the reservation
// by hand releases the bucket.
func TestReservedBucket(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startOperator()
	owner := f.create(f.newFleet("owner", v1alpha1.ProfileBucket, 1))
	f.waitConverged(owner.Name)
	rival := f.newFleet("rival", v1alpha1.ProfileBucket, 1)
	rival.Spec.Bucket = owner.Spec.Bucket
	rival = f.create(rival)

	refused := func(fl *v1alpha1.CelldFleet) bool {
		bound, degraded := condition(fl, v1alpha1.ConditionReservationBound), condition(fl, v1alpha1.ConditionDegraded)
		return fl.Status.ObservedGeneration == fl.Generation &&
			bound.Status == metav1.ConditionFalse && bound.Reason == "BucketReserved" &&
			degraded.Status == metav1.ConditionTrue && degraded.Reason == "BucketReserved"
	}
	noWorkload := func() {
		t.Helper()
		if _, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, rival.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("deployment %s: %v; want none", rival.Name, err)
		}
		if _, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, rival.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("statefulset %s: %v; want none", rival.Name, err)
		}
		if pods := f.members(rival); len(pods) != 0 {
			t.Errorf("%d members of the refused fleet; want none", len(pods))
		}
	}
	fl := f.waitFleet(rival.Name, time.Minute, "refused: ReservationBound=False and Degraded=True, reason BucketReserved", refused)
	t.Logf("refused: %s", condition(fl, v1alpha1.ConditionDegraded).Message)
	noWorkload()
	if r := f.reservation(owner); r.Spec.FleetUID != owner.UID {
		t.Errorf("reservation now bound to %s; want the owner %s", r.Spec.FleetUID, owner.UID)
	}
	f.waitConverged(owner.Name)

	// The reservation outlives its fleet: with the owner gone the bucket stays refused. A spec
	// change makes the operator decide again.
	f.deleteFleet(owner.Name, true)
	f.update(rival.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 2 })
	f.waitFleet(rival.Name, time.Minute, "still refused after the owner is deleted", refused)
	noWorkload()

	r := f.reservation(owner)
	if err := suite.celld.CelldV1alpha1().CelldReservations(f.ns).Delete(f.ctx, r.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("reservation %s deleted by hand", r.Name)
	fl = f.waitConverged(rival.Name)
	if r := f.reservation(fl); r.Spec.FleetUID != rival.UID {
		t.Errorf("reservation bound to %s; want the rival %s now", r.Spec.FleetUID, rival.UID)
	}
	if _, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, rival.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("deployment of the released fleet: %v", err)
	}
}
