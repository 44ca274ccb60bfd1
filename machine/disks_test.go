package machine

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
)

// TestResizePremiseNeverShrinks: a resize goes out only to the claim decided on, still the
// fleet's, still there, not being deleted, and still asking for less than the size; a claim that
// asks for the size already, or more (someone enlarged it since), is never written.
func TestResizePremiseNeverShrinks(t *testing.T) {
	size := resource.MustParse("2Gi")
	p := &Premise{DiskOf: "fleet-uid", DiskUID: "claim-uid", DiskBelow: &size}
	claim := func(req string, edit func(*corev1.PersistentVolumeClaim)) Fresh {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-a-0", UID: "claim-uid",
			Labels: map[string]string{kinds.LabelFleetUID: "fleet-uid"}},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(req)}}}}
		if edit != nil {
			edit(c)
		}
		return Fresh{Disk: c}
	}
	if err := p.Check(claim("1Gi", nil)); err != nil {
		t.Errorf("a claim of 1Gi to grow to 2Gi: %v", err)
	}
	if err := p.Check(claim("2047Mi", nil)); err != nil {
		t.Errorf("a claim of 2047Mi to grow to 2Gi: %v", err)
	}
	for name, fresh := range map[string]Fresh{
		"gone":                     {},
		"at the size already":      claim("2Gi", nil),
		"at the size in MiB":       claim("2048Mi", nil),
		"enlarged past it by hand": claim("3Gi", nil),
		"being deleted":            claim("1Gi", func(c *corev1.PersistentVolumeClaim) { c.DeletionTimestamp = &metav1.Time{} }),
		"replaced":                 claim("1Gi", func(c *corev1.PersistentVolumeClaim) { c.UID = "another" }),
		"relabelled":               claim("1Gi", func(c *corev1.PersistentVolumeClaim) { c.Labels[kinds.LabelFleetUID] = "other-fleet" }),
	} {
		if err := p.Check(fresh); !errors.Is(err, ErrPremiseChanged) {
			t.Errorf("a claim %s: %v; want the premise refused", name, err)
		}
	}
}

// TestDisksGrowOnlyTheFleetsOwnClaims: only the fleet's own claims (its exact claim names and
// its UID label), not being deleted, asking for less, are grown; one asking for more is named
// and kept; a class that forbids expansion grows none.
func TestDisksGrowOnlyTheFleetsOwnClaims(t *testing.T) {
	disk := func(name string, uid types.UID, ord int, req string) events.Disk {
		return events.Disk{Name: name, UID: types.UID(name), FleetUID: uid, Ordinal: ord, Requested: resource.MustParse(req), Capacity: resource.MustParse(req)}
	}
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "u1"}, Spec: v1alpha1.CelldFleetSpec{
		Profile: v1alpha1.ProfilePersistentFleet, Storage: &v1alpha1.StorageSpec{StorageClassName: "c", Size: resource.MustParse("2Gi")}}}
	gone := disk("data-a-4", "u1", 4, "1Gi")
	gone.Terminating = true
	v := &events.View{Fleet: f, Disks: []events.Disk{
		disk("data-a-0", "u1", 0, "1Gi"),
		disk("data-a-1", "u2", 1, "1Gi"),  // another fleet's
		disk("data-a-2", "u1", 2, "3Gi"),  // enlarged by hand
		disk("data-a-x", "u1", -1, "1Gi"), // labelled, but no claim the StatefulSet makes
		disk("data-a-3", "u1", 3, "2Gi"),
		gone,
	}}
	dx := computeDisks(v)
	var grow []string
	for _, d := range dx.grow {
		grow = append(grow, d.Name)
	}
	if !slices.Equal(grow, []string{"data-a-0"}) || !slices.Equal(dx.larger, []string{"data-a-2"}) {
		t.Errorf("grow %v, larger %v; want [data-a-0] and [data-a-2]", grow, dx.larger)
	}
	if dx.noExpansion {
		t.Errorf("a class not known to forbid expansion held the resize")
	}
	v.StorageClassFixed = true
	if dx := computeDisks(v); !dx.noExpansion {
		t.Errorf("a class that forbids expansion did not hold the resize")
	}
	f.Spec.Storage.Size = resource.MustParse("1Gi")
	v.StorageClassFixed = false
	if dx := computeDisks(v); len(dx.grow) != 0 || dx.resizing() {
		t.Errorf("every own claim at or above the size: grow %v, resizing %t; want nothing", dx.grow, dx.resizing())
	}
}

// TestDeletionStopsMembersAStatefulSetLeft: a fleet deleted while its StatefulSet is gone (deleted
// with propagation Orphan, to be created again with a new claim template) creates it again at no
// member, which adopts its members and stops them; otherwise nothing would ever stop them, and the
// deletion would wait for them forever.
func TestDeletionStopsMembersAStatefulSetLeft(t *testing.T) {
	now := metav1.Now()
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1", Generation: 2, DeletionTimestamp: &now,
		Finalizers: []string{"celld.io/disks"}},
		Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfilePersistentFleet, Members: 2, Image: "celld:1",
			Storage: &v1alpha1.StorageSpec{StorageClassName: "c", Size: resource.MustParse("2Gi")}}}
	v := &events.View{Now: now.Time, Namespace: "ns", Name: "a", Fleet: f, Deleting: true, HasFinalizer: true,
		Workload: events.WorkloadView{Settled: -1},
		Members:  []events.Member{{Name: "a-0", UID: "p0", Ordinal: 0, Ready: true}, {Name: "a-1", UID: "p1", Ordinal: 1, Ready: true}}}
	d := New().Step(v)
	for _, a := range d.Actions {
		if a.Kind == Apply && a.Ref.Kind == "StatefulSet" {
			if s, ok := a.Object.(interface{ GetName() string }); ok && s.GetName() == "a" && a.Key == "apply/StatefulSet/ns/a/replicas=0" {
				return
			}
		}
	}
	t.Errorf("deleting with the StatefulSet gone and 2 members left: %v; want the StatefulSet applied at no member", d.Actions)
}

// TestOnlineGrowthIsNotARestart: the resizer marks every expanded volume FileSystemResizePending,
// and the kubelet grows a mounted one while its member runs where the driver can; a member is
// started again only for a filesystem still waiting OnlineGrowGrace after it was marked, and the
// machine asks to be stepped again when that grace ends. On real nodes the earlier rule restarted
// every member of a fleet whose disks had already grown online.
func TestOnlineGrowthIsNotARestart(t *testing.T) {
	now := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "u1"}, Spec: v1alpha1.CelldFleetSpec{
		Profile: v1alpha1.ProfilePersistentFleet, Storage: &v1alpha1.StorageSpec{StorageClassName: "c", Size: resource.MustParse("2Gi")}}}
	view := func(since ...time.Time) *events.View {
		v := &events.View{Now: now, Fleet: f}
		for i, s := range since {
			name := kinds.ClaimName(f.Name, i)
			v.Members = append(v.Members, events.Member{Name: fmt.Sprintf("a-%d", i), ClaimName: name})
			v.Disks = append(v.Disks, events.Disk{Name: name, UID: types.UID(name), FleetUID: "u1", Ordinal: i,
				Requested: resource.MustParse("2Gi"), Capacity: resource.MustParse("2Gi"),
				Resize: events.ResizeFileSystemPending, ResizePendingSince: s})
		}
		return v
	}
	fresh := view(now.Add(-10*time.Second), now.Add(-90*time.Second))
	if dx := computeDisks(fresh); dx.fsPending || dx.fsWait != OnlineGrowGrace-90*time.Second {
		t.Errorf("filesystems pending for 10 s and 90 s: restart %t, wait %s; want no restart, a wait of %s",
			dx.fsPending, dx.fsWait, OnlineGrowGrace-90*time.Second)
	}
	if fx := computeFacts(fresh); fx.wait <= 0 || fx.wait > OnlineGrowGrace-90*time.Second {
		t.Errorf("the machine asks to be stepped again after %s; want at most %s", fx.wait, OnlineGrowGrace-90*time.Second)
	}
	if dx := computeDisks(view(now.Add(-10*time.Second), now.Add(-OnlineGrowGrace))); !dx.fsPending {
		t.Errorf("a filesystem pending for the whole grace did not start its member again")
	}
	if dx := computeDisks(view(time.Time{})); !dx.fsPending {
		t.Errorf("a filesystem pending since a time the claim does not say did not start its member again")
	}
}

// TestNodeResizeErrorRestartsAtOnce: a kubelet that failed to grow a running member's filesystem
// (NodeResizeError: a driver that grows only an unmounted one) calls for the member to start
// again without waiting for the grace; a claim not of a member calls for nothing.
func TestNodeResizeErrorRestartsAtOnce(t *testing.T) {
	now := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "u1"}, Spec: v1alpha1.CelldFleetSpec{
		Profile: v1alpha1.ProfilePersistentFleet, Storage: &v1alpha1.StorageSpec{StorageClassName: "c", Size: resource.MustParse("2Gi")}}}
	name := kinds.ClaimName(f.Name, 0)
	v := &events.View{Now: now, Fleet: f, Disks: []events.Disk{{Name: name, UID: "c0", FleetUID: "u1", Ordinal: 0,
		Requested: resource.MustParse("2Gi"), Capacity: resource.MustParse("2Gi"), Resize: events.ResizeFailed, NodeResizeFailed: true}}}
	if dx := computeDisks(v); dx.fsPending {
		t.Errorf("a claim no member holds started a member again")
	}
	v.Members = []events.Member{{Name: "a-0", ClaimName: name}}
	if dx := computeDisks(v); !dx.fsPending {
		t.Errorf("a running member's filesystem the kubelet failed to grow did not start the member again")
	}
}

// TestResizeIsHeldToTheFleetsGeneration: each claim's resize is decided on the fleet's
// generation, which a deletion raises (the fleet's own, or its CRD's at an uninstall, which
// takes every fleet with it): a fleet deleted between the decision and the write has none of its
// claims grown. The same claim read on the decided generation is grown.
func TestResizeIsHeldToTheFleetsGeneration(t *testing.T) {
	v := grownDisksView(true)
	v.Fleet.Generation = 7
	d := New().Step(v)
	resized := 0
	for _, a := range d.Actions {
		if a.Kind != ResizeDisk {
			continue
		}
		resized++
		p := a.Premise
		if p == nil || p.Fleet != v.Fleet.Name || p.FleetGeneration != 7 {
			t.Fatalf("%s: premise %+v; want it held to fleet %s at generation 7", a.Key, p, v.Fleet.Name)
		}
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: a.Ref.Name, UID: a.UID,
			Labels: map[string]string{kinds.LabelFleetUID: string(v.Fleet.UID)}},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if err := p.Check(Fresh{Disk: claim, FleetGeneration: 7}); err != nil {
			t.Errorf("%s on the decided generation: %v", a.Key, err)
		}
		for name, gen := range map[string]int64{"deleted since (generation 8)": 8, "gone": 0} {
			if err := p.Check(Fresh{Disk: claim, FleetGeneration: gen}); !errors.Is(err, ErrPremiseChanged) {
				t.Errorf("%s, the fleet %s: %v; want the premise refused", a.Key, name, err)
			}
		}
	}
	if resized != 3 {
		t.Errorf("%d claims grown, want 3: %v", resized, d.Actions)
	}
}
