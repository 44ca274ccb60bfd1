package events

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

func TestOrdinalOfAName(t *testing.T) {
	for _, c := range []struct {
		name string
		want int
	}{
		{"a-0", 0}, {"a-7", 7}, {"a-b-3", -1}, {"a-03", -1}, {"a-", -1}, {"b-0", -1}, {"a0", -1}, {"a--1", -1},
	} {
		if got := ordinal(c.name, "a"); got != c.want {
			t.Errorf("ordinal(%q, \"a\") = %d, want %d", c.name, got, c.want)
		}
	}
}

// The settled size is what the workload's annotation says, 0 included; anything unreadable is
// "never settled" (-1), not 0.
func TestSettledSize(t *testing.T) {
	for _, c := range []struct {
		annotations map[string]string
		want        int32
	}{
		{map[string]string{kinds.AnnotationSettled: "0"}, 0},
		{map[string]string{kinds.AnnotationSettled: "5"}, 5},
		{map[string]string{kinds.AnnotationSettled: "-2"}, -1},
		{map[string]string{kinds.AnnotationSettled: "x"}, -1},
		{map[string]string{kinds.AnnotationSettled: "4294967296"}, -1},
		{nil, -1},
	} {
		if got := settled(c.annotations); got != c.want {
			t.Errorf("settled(%v) = %d, want %d", c.annotations, got, c.want)
		}
	}
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1"}}
	if w := Normalize("ns", "a", &Observation{Now: t0, Fleet: f}).Workload; w.Exists || w.Settled != -1 {
		t.Errorf("no workload: %+v, want none that never settled", w)
	}
}

// A member is Ready by its PodReady condition alone; a Deployment's members have no ordinal.
func TestMemberFacts(t *testing.T) {
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1"}}
	pod := func(name string, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kinds.LabelFleetUID: "u1"}},
			Status: corev1.PodStatus{Conditions: conds}}
	}
	cond := func(t corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: s}
	}
	pods := []*corev1.Pod{
		pod("a-1", cond(corev1.PodScheduled, corev1.ConditionFalse), cond(corev1.PodReady, corev1.ConditionTrue)),
		pod("a-2", cond(corev1.ContainersReady, corev1.ConditionTrue)),
		pod("a-0", cond(corev1.ContainersReady, corev1.ConditionTrue), cond(corev1.PodReady, corev1.ConditionFalse)),
	}
	wantReady := map[string]bool{"a-0": false, "a-1": true, "a-2": false}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	for _, m := range Normalize("ns", "a", &Observation{Now: t0, Fleet: f, StatefulSet: sts, Pods: pods}).Members {
		if m.Ready != wantReady[m.Name] {
			t.Errorf("StatefulSet member %s: ready %t, want %t", m.Name, m.Ready, wantReady[m.Name])
		}
		if want := ordinal(m.Name, "a"); m.Ordinal != want || want < 0 {
			t.Errorf("StatefulSet member %s: ordinal %d, want %d", m.Name, m.Ordinal, want)
		}
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	members := Normalize("ns", "a", &Observation{Now: t0, Fleet: f, Deployment: d, Pods: pods}).Members
	if len(members) != len(pods) {
		t.Fatalf("Deployment members: %d, want %d", len(members), len(pods))
	}
	for i, m := range members {
		if m.Ordinal != -1 {
			t.Errorf("Deployment member %s: ordinal %d, want -1 (a Deployment's Pods have none)", m.Name, m.Ordinal)
		}
		// Without ordinals, by name: the same caches always give the same order.
		if want := fmt.Sprintf("a-%d", i); m.Name != want {
			t.Errorf("Deployment member %d is %s, want %s", i, m.Name, want)
		}
	}
}

func TestDiskFacts(t *testing.T) {
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1"}}
	claim := func(name string, phase corev1.PersistentVolumeClaimPhase, deleting bool) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
		if deleting {
			c.DeletionTimestamp = &metav1.Time{Time: t0}
		}
		return c
	}
	disks := Normalize("ns", "a", &Observation{Now: t0, Fleet: f, PVCs: []*corev1.PersistentVolumeClaim{
		claim("data-a-2", corev1.ClaimBound, true), claim("data-a-0", corev1.ClaimLost, false), claim("data-a-1", corev1.ClaimBound, false),
	}}).Disks
	want := []Disk{{Name: "data-a-0", Ordinal: 0, Lost: true}, {Name: "data-a-1", Ordinal: 1}, {Name: "data-a-2", Ordinal: 2, Terminating: true}}
	if !slices.Equal(disks, want) {
		t.Errorf("disks %+v, want %+v", disks, want)
	}
}

// Only the unreachable and out-of-service taints make a Ready node unhealthy, and only the
// second fences it: any other taint is a scheduling matter.
func TestNodeHealthByTaint(t *testing.T) {
	ready := func(taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{Spec: corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	for _, c := range []struct {
		name          string
		node          *corev1.Node
		ready, fenced bool
	}{
		{"untainted", ready(), true, false},
		{"another taint", ready(corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}), true, false},
		{"unschedulable taint", ready(corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}), true, false},
		{"unreachable", ready(corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}), false, false},
		{"out of service", ready(corev1.Taint{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}), false, true},
	} {
		if nv := NodeHealth(c.node); nv.Ready != c.ready || nv.Fenced != c.fenced {
			t.Errorf("%s: ready %t fenced %t, want %t %t", c.name, nv.Ready, nv.Fenced, c.ready, c.fenced)
		}
	}
}

// A StorageClass is missing only for a fleet that keeps disks, once the cache of classes is
// known, and only when it lacks the class.
func TestStorageClassMissing(t *testing.T) {
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}}
	for _, c := range []struct {
		name    string
		profile v1alpha1.Profile
		known   bool
		class   *storagev1.StorageClass
		missing bool
	}{
		{"persistent, known, absent", v1alpha1.ProfilePersistentFleet, true, nil, true},
		{"persistent, known, present", v1alpha1.ProfilePersistentFleet, true, class, false},
		{"persistent, not known yet", v1alpha1.ProfilePersistentFleet, false, nil, false},
		{"bucket, known, absent", v1alpha1.ProfileBucket, true, nil, false},
	} {
		f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1"},
			Spec: v1alpha1.CelldFleetSpec{Profile: c.profile}}
		v := Normalize("ns", "a", &Observation{Now: t0, Fleet: f, StorageClassKnown: c.known, StorageClass: c.class})
		if v.StorageClassMissing != c.missing {
			t.Errorf("%s: StorageClassMissing %t, want %t", c.name, v.StorageClassMissing, c.missing)
		}
	}
}
