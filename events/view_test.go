package events

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestNormalize(t *testing.T) {
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1", Finalizers: []string{v1alpha1.FleetFinalizer}},
		Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfilePersistentFleet, Bucket: v1alpha1.BucketSpec{Name: "b"}}}
	pod := func(name, node string, ready bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kinds.LabelFleetUID: "u1", appsv1.StatefulSetRevisionLabel: "r1"}},
			Spec: corev1.PodSpec{NodeName: node}}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(t0)}}
		return p
	}
	stranger := pod("a-9", "n1", true)
	stranger.Labels[kinds.LabelFleetUID] = "other"
	claim := func(name, uid string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kinds.LabelFleetUID: uid}}}
	}
	unreachable := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(t0)}}}}
	ready := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	tainted := ready.DeepCopy()
	tainted.Name = "n3"
	tainted.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, TimeAdded: &metav1.Time{Time: t0.Add(time.Minute)}}}
	older := &v1alpha1.CelldReservation{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "x", CreationTimestamp: metav1.NewTime(t0)},
		Spec: v1alpha1.CelldReservationSpec{FleetUID: "first", Bucket: v1alpha1.BucketSpec{Name: "b"}}}
	newer := &v1alpha1.CelldReservation{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", CreationTimestamp: metav1.NewTime(t0.Add(time.Hour))},
		Spec: v1alpha1.CelldReservationSpec{FleetUID: "u1", Bucket: v1alpha1.BucketSpec{Name: "b"}}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{kinds.AnnotationSettled: "3"}}}

	v := Normalize("ns", "a", &Observation{Now: t0, Fleet: f, StatefulSet: sts, NodesSynced: true,
		Pods:         []*corev1.Pod{pod("a-10", "n1", true), pod("a-2", "n2", true), stranger, pod("a-1", "n3", false)},
		PVCs:         []*corev1.PersistentVolumeClaim{claim("data-a-1", "u1"), claim("data-a-0", "old"), claim("data-a-x", "u1")},
		Nodes:        map[string]*corev1.Node{"n1": ready, "n2": unreachable, "n3": tainted},
		Reservations: []*v1alpha1.CelldReservation{newer, older}})

	if !v.HasFinalizer || v.Deleting || v.Workload.Settled != 3 {
		t.Errorf("fleet facts: finalizer %t deleting %t settled %d", v.HasFinalizer, v.Deleting, v.Workload.Settled)
	}
	var names []string
	for _, m := range v.Members {
		names = append(names, m.Name)
	}
	if len(names) != 3 || names[0] != "a-1" || names[1] != "a-2" || names[2] != "a-10" || v.Members[0].Ordinal != 1 {
		t.Errorf("members by ordinal, strangers left out: %v", names)
	}
	if v.Nodes["n2"].Ready || v.Nodes["n3"].Ready || !v.Nodes["n1"].Ready || !v.Nodes["n3"].UnhealthySince.Equal(t0.Add(time.Minute)) {
		t.Errorf("node health: %+v", v.Nodes)
	}
	if v.Disks[0].Name != "data-a-0" || v.Disks[0].FleetUID != "old" || v.Disks[1].Ordinal != 1 || v.Disks[2].Ordinal != -1 {
		t.Errorf("disks: %+v", v.Disks)
	}
	if !v.Reservation.Exists || v.Reservation.BoundTo != "first" || v.Reservation.Conflicts != 1 {
		t.Errorf("the oldest reservation of a bucket binds it: %+v", v.Reservation)
	}
}

// TestNormalizeMaintenance: what a drain leaves on the objects reaches the view: the eviction
// on the Pod, the scheduler's refusal of its replacement, the node a disk is on, the cordon.
func TestNormalizeMaintenance(t *testing.T) {
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1"},
		Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfilePersistentFleet, Bucket: v1alpha1.BucketSpec{Name: "b"}}}
	labels := map[string]string{kinds.LabelFleetUID: "u1"}
	evicted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-0", Labels: labels, DeletionTimestamp: &metav1.Time{Time: t0}},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: DisruptionEviction},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}}
	unplaced := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-1", Labels: labels},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse, Reason: "old"},
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "1 node(s) were unschedulable"}}}}
	gated := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-2", Labels: labels},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated, Message: "gated"}}}}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-a-1", Labels: labels,
		Annotations: map[string]string{AnnotationSelectedNode: "n1"}}}
	cordoned := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Unschedulable: true}}
	v := Normalize("ns", "a", &Observation{Now: t0, Fleet: f, NodesSynced: true, Pods: []*corev1.Pod{evicted, unplaced, gated},
		PVCs: []*corev1.PersistentVolumeClaim{claim}, Nodes: map[string]*corev1.Node{"n1": cordoned, "n2": {ObjectMeta: metav1.ObjectMeta{Name: "n2"}}}})
	if m := v.Members[0]; m.Disruption != DisruptionEviction || m.Unschedulable != "" {
		t.Errorf("evicted member: disruption %q, unschedulable %q", m.Disruption, m.Unschedulable)
	}
	if m := v.Members[1]; m.Disruption != "" || m.Unschedulable != "1 node(s) were unschedulable" {
		t.Errorf("unplaced member: disruption %q (a false condition is none), unschedulable %q", m.Disruption, m.Unschedulable)
	}
	if m := v.Members[2]; m.Unschedulable != "" {
		t.Errorf("a member gated from scheduling is not refused by the scheduler: %q", m.Unschedulable)
	}
	if v.Disks[0].Node != "n1" {
		t.Errorf("the claim's node: %q, want n1", v.Disks[0].Node)
	}
	if !v.Nodes["n1"].Cordoned || v.Nodes["n2"].Cordoned {
		t.Errorf("cordons: %+v", v.Nodes)
	}
}

// Usage is kept by the fleet's name: a sample taken before the fleet was created measured an
// earlier fleet of that name and decides nothing for this one; a later one, or word that the
// cluster serves no metrics, does.
func TestUtilizationOfAnEarlierFleetOfTheSameName(t *testing.T) {
	created := t0.Add(time.Hour)
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u2", CreationTimestamp: metav1.NewTime(created)}}
	for _, c := range []struct {
		name string
		u    Utilization
		kept bool
	}{
		{"sampled before the fleet existed", Utilization{Time: created.Add(-time.Minute), Percent: 140, Members: 4}, false},
		{"sampled as it was created", Utilization{Time: created, Percent: 140, Members: 4}, true},
		{"sampled since", Utilization{Time: created.Add(time.Minute), Percent: 20, Members: 3}, true},
		{"no metrics API", Utilization{Time: created.Add(-time.Minute), Unavailable: true}, true},
	} {
		u := c.u
		v := Normalize("ns", "a", &Observation{Now: created.Add(time.Hour), Fleet: f, Utilization: &u})
		if (v.Utilization != nil) != c.kept {
			t.Errorf("%s: utilization %+v, kept %t; want kept %t", c.name, u, v.Utilization != nil, c.kept)
		}
	}
}

// TestNormalizeOrphans: a member is an orphan when nothing controls it (its StatefulSet was
// deleted with propagation Orphan), not when it is owned by something that is not its controller.
func TestNormalizeOrphans(t *testing.T) {
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1"},
		Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfilePersistentFleet, Bucket: v1alpha1.BucketSpec{Name: "b"}}}
	yes := true
	pod := func(name string, refs ...metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kinds.LabelFleetUID: "u1"}, OwnerReferences: refs}}
	}
	controlled := pod("a-0", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "a", UID: "s1", Controller: &yes})
	orphan := pod("a-1")
	owned := pod("a-2", metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "c1"})
	v := Normalize("ns", "a", &Observation{Now: t0, Fleet: f, NodesSynced: true, Pods: []*corev1.Pod{controlled, orphan, owned}})
	want := map[string]bool{"a-0": false, "a-1": true, "a-2": true}
	for _, m := range v.Members {
		if m.Orphan != want[m.Name] {
			t.Errorf("member %s: orphan %t, want %t", m.Name, m.Orphan, want[m.Name])
		}
	}
	if len(v.Members) != 3 {
		t.Fatalf("members: %+v", v.Members)
	}
}
