package judge_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/proptest/judge"
)

// TestUnfencedIsReported: a pass past the grace period, with a member of a StatefulSet fleet
// (or a terminating one of any) on an unhealthy node nobody fenced, must write a Degraded status
// that, as MemberUnreachable, names the member and its node. Within the grace period, on a
// fenced or gone node, or for a Deployment's running member, nothing is required.
func TestUnfencedIsReported(t *testing.T) {
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	fleet := func(profile v1alpha1.Profile, workload v1alpha1.WorkloadKind) *v1alpha1.CelldFleet {
		return &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid-a"},
			Spec: v1alpha1.CelldFleetSpec{Profile: profile, Workload: workload,
				Healing: v1alpha1.HealingSpec{UnreachableGracePeriod: &metav1.Duration{Duration: time.Minute}}}}
	}
	pod := func(terminating bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-1", Namespace: "ns", Labels: map[string]string{"celld.io/fleet-uid": "uid-a"}},
			Spec: corev1.PodSpec{NodeName: "n1"}}
		if terminating {
			p.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return p
	}
	node := func(badFor time.Duration, taints ...corev1.Taint) map[string]*corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
				LastTransitionTime: metav1.Time{Time: now.Add(-badFor)}}}}}
		return map[string]*corev1.Node{"n1": n}
	}
	persistent := fleet(v1alpha1.ProfilePersistentFleet, "")
	deployment := fleet(v1alpha1.ProfileBucket, v1alpha1.WorkloadDeployment)
	ordered := fleet(v1alpha1.ProfileBucket, v1alpha1.WorkloadOrderedStatefulSet)
	healthy := statusWrite(metav1.ConditionFalse, "Healthy", "")
	cases := []struct {
		name  string
		f     *v1alpha1.CelldFleet
		pod   *corev1.Pod
		nodes map[string]*corev1.Node
		sent  []sim.Request
		want  string
	}{
		{"reported", persistent, pod(false), node(2 * time.Minute), statusWrite("True", "MemberUnreachable", "member a-1 is on node n1"), ""},
		{"another Degraded reason", persistent, pod(false), node(2 * time.Minute), statusWrite("True", "NameTaken", "Service/a"), ""},
		{"not reported", persistent, pod(false), node(2 * time.Minute), healthy, "wrote Degraded False"},
		{"an ordered StatefulSet's member not reported", ordered, pod(false), node(2 * time.Minute), healthy, "wrote Degraded False"},
		{"a Deployment's terminating member not reported", deployment, pod(true), node(2 * time.Minute), healthy, "wrote Degraded False"},
		{"reported without the member's name", persistent, pod(false), node(2 * time.Minute), statusWrite("True", "MemberUnreachable", "a member is on node n1"), "does not name one of the members [a-1]"},
		{"reported without the node's name", persistent, pod(false), node(2 * time.Minute), statusWrite("True", "MemberUnreachable", "member a-1 is unreachable"), "does not name one of the members"},
		{"within the grace period", persistent, pod(false), node(30 * time.Second), healthy, ""},
		{"the unreachable taint is recent", persistent, pod(false),
			node(2*time.Minute, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: now.Add(-10 * time.Second)}}), healthy, ""},
		{"fenced", persistent, pod(false), node(2*time.Minute, corev1.Taint{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}), healthy, ""},
		{"the node gone", persistent, pod(false), map[string]*corev1.Node{}, healthy, ""},
		{"a Deployment's running member", deployment, pod(false), node(2 * time.Minute), healthy, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := judge.New(sim.New(sim.Options{}))
			err := j.Unfenced(c.f, now, []*corev1.Pod{c.pod}, c.nodes, true, c.sent)
			wantReported(t, err, c.want)
		})
	}
	t.Run("the node cache not synced", func(t *testing.T) {
		j := judge.New(sim.New(sim.Options{}))
		if err := j.Unfenced(persistent, now, []*corev1.Pod{pod(false)}, node(2*time.Minute), false, healthy); err != nil {
			t.Errorf("a view whose nodes are not synced says nothing of them: %v", err)
		}
	})
}

// TestStuckIsReported: a pass with a StatefulSet fleet's member of the update revision, not
// ready past the grace period on a healthy node (or none yet) with its disk usable, must write a
// Degraded status that, as MemberStuck, names the member. A ready, recent, terminating or older
// member, one on an unhealthy node, or one whose disk is lost, missing or being deleted, is
// healing's or a person's, not stuck.
// unplaced is p as the scheduler leaves a Pod it found no node for, with its refusal.
func unplaced(p *corev1.Pod, refusal string) *corev1.Pod {
	p.Spec.NodeName = ""
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: refusal})
	return p
}

// cordon adds a cordoned node to nodes.
func cordon(nodes map[string]*corev1.Node, name string) map[string]*corev1.Node {
	nodes[name] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: true}}
	return nodes
}

// onNode is claims with their volumes on node, as the scheduler's selected-node says.
func onNode(claims []*corev1.PersistentVolumeClaim, node string) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for _, c := range claims {
		c = c.DeepCopy()
		c.Annotations = map[string]string{"volume.kubernetes.io/selected-node": node}
		out = append(out, c)
	}
	return out
}

func TestStuckIsReported(t *testing.T) {
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid-a"},
		Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfilePersistentFleet,
			Healing: v1alpha1.HealingSpec{UnreachableGracePeriod: &metav1.Duration{Duration: time.Minute}}}}
	set := &appsv1.StatefulSet{Status: appsv1.StatefulSetStatus{UpdateRevision: "a-2", CurrentRevision: "a-1"}}
	type podOpt func(*corev1.Pod)
	pod := func(opts ...podOpt) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-1", Namespace: "ns", CreationTimestamp: metav1.Time{Time: now.Add(-time.Hour)},
			Labels: map[string]string{"celld.io/fleet-uid": "uid-a", appsv1.StatefulSetRevisionLabel: "a-2"}},
			Spec: corev1.PodSpec{NodeName: "n1", Volumes: []corev1.Volume{{Name: "data",
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-a-1"}}}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse,
				LastTransitionTime: metav1.Time{Time: now.Add(-2 * time.Minute)}}}}}
		for _, o := range opts {
			o(p)
		}
		return p
	}
	claim := func(phase corev1.PersistentVolumeClaimPhase, deleting bool) []*corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-a-1", Namespace: "ns"}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
		if deleting {
			c.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return []*corev1.PersistentVolumeClaim{c}
	}
	readyNode := func(status corev1.ConditionStatus) map[string]*corev1.Node {
		return map[string]*corev1.Node{"n1": {ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.Time{Time: now.Add(-time.Hour)}}}}}}
	}
	healthy := statusWrite("False", "Healthy", "")
	bound := claim(corev1.ClaimBound, false)
	cases := []struct {
		name   string
		pod    *corev1.Pod
		claims []*corev1.PersistentVolumeClaim
		nodes  map[string]*corev1.Node
		sent   []sim.Request
		want   string
	}{
		{"reported", pod(), bound, readyNode("True"), statusWrite("True", "MemberStuck", "member a-1 has not been ready"), ""},
		{"another Degraded reason", pod(), bound, readyNode("True"), statusWrite("True", "NameTaken", "Service/a"), ""},
		{"not reported", pod(), bound, readyNode("True"), healthy, "wrote Degraded False"},
		{"not reported, never scheduled", pod(func(p *corev1.Pod) { p.Spec.NodeName = "" }), bound, readyNode("True"), healthy, "wrote Degraded False"},
		{"not reported, its claim pending", pod(), claim(corev1.ClaimPending, false), readyNode("True"), healthy, "wrote Degraded False"},
		{"reported without the member's name", pod(), bound, readyNode("True"), statusWrite("True", "MemberStuck", "a member is stuck"), "does not name one of the members not ready [a-1]"},
		{"ready", pod(func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionTrue }), bound, readyNode("True"), healthy, ""},
		{"within the grace period", pod(func(p *corev1.Pod) {
			p.Status.Conditions[0].LastTransitionTime = metav1.Time{Time: now.Add(-30 * time.Second)}
		}), bound, readyNode("True"), healthy, ""},
		{"created within the grace period", pod(func(p *corev1.Pod) { p.CreationTimestamp = metav1.Time{Time: now.Add(-30 * time.Second)} }), bound, readyNode("True"), healthy, ""},
		{"terminating", pod(func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now} }), bound, readyNode("True"), healthy, ""},
		{"of an older revision", pod(func(p *corev1.Pod) { p.Labels[appsv1.StatefulSetRevisionLabel] = "a-1" }), bound, readyNode("True"), healthy, ""},
		{"on an unhealthy node", pod(), bound, readyNode("Unknown"), healthy, ""},
		{"on a node gone", pod(), bound, map[string]*corev1.Node{}, healthy, ""},
		{"its claim lost", pod(), claim(corev1.ClaimLost, false), readyNode("True"), healthy, ""},
		{"its claim being deleted", pod(), claim(corev1.ClaimBound, true), readyNode("True"), healthy, ""},
		{"its claim missing", pod(), nil, readyNode("True"), healthy, ""},
		{"never scheduled, a cordoned node among the refusal's", unplaced(pod(), "0/2 nodes are available: 1 node(s) were unschedulable, 1 node(s) didn't match pod anti-affinity rules."), bound, cordon(readyNode("True"), "n2"), healthy, ""},
		{"never scheduled, the refusal's cordon lifted", unplaced(pod(), "0/2 nodes are available: 1 node(s) were unschedulable."), bound, readyNode("True"), healthy, "wrote Degraded False"},
		{"never scheduled, refused before any node while one is cordoned", unplaced(pod(), "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."), bound, cordon(readyNode("True"), "n2"), healthy, "wrote Degraded False"},
		{"never scheduled, its disk on a cordoned node", unplaced(pod(), "0/2 nodes are available: 1 node(s) had volume node affinity conflict."), onNode(bound, "n2"), cordon(readyNode("True"), "n2"), healthy, ""},
		{"never scheduled, its disk on a node not cordoned", unplaced(pod(), "0/2 nodes are available: 1 node(s) had volume node affinity conflict."), onNode(bound, "n1"), cordon(readyNode("True"), "n2"), healthy, "wrote Degraded False"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := judge.New(sim.New(sim.Options{}))
			err := j.Stuck(f, now, set, []*corev1.Pod{c.pod}, c.claims, c.nodes, true, c.sent)
			wantReported(t, err, c.want)
		})
	}
	// A staged rollout held at partition 2: a-1 comes back on the current revision, so on it a-1
	// is stuck, and on the update revision it is a broken rollout's (healing replaces it).
	held := set.DeepCopy()
	held.Name = "a"
	two := int32(2)
	held.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: &two}
	onCurrent := pod(func(p *corev1.Pod) { p.Labels[appsv1.StatefulSetRevisionLabel] = "a-1" })
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"held below the partition on the current revision", onCurrent, "wrote Degraded False"},
		{"held below the partition on the update revision", pod(), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := judge.New(sim.New(sim.Options{}))
			wantReported(t, j.Stuck(f, now, held, []*corev1.Pod{c.pod}, bound, readyNode("True"), true, healthy), c.want)
		})
	}
}

// TestDiskGoingIsReported: a pass with a running member whose claim is being deleted or Lost
// must write a Degraded status that, as DiskLost, names the claim; a terminating member's claim,
// another claim, or a fleet being deleted asks for nothing.
func TestDiskGoingIsReported(t *testing.T) {
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid-a"},
		Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfilePersistentFleet}}
	deleting := f.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	pod := func(terminating bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-1", Namespace: "ns", Labels: map[string]string{"celld.io/fleet-uid": "uid-a"}},
			Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data",
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-a-1"}}}}}}
		if terminating {
			p.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return p
	}
	claim := func(name string, phase corev1.PersistentVolumeClaimPhase, deleted bool) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
		if deleted {
			c.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return c
	}
	healthy := statusWrite("False", "Healthy", "")
	cases := []struct {
		name  string
		f     *v1alpha1.CelldFleet
		pod   *corev1.Pod
		claim *corev1.PersistentVolumeClaim
		sent  []sim.Request
		want  string
	}{
		{"reported", f, pod(false), claim("data-a-1", corev1.ClaimBound, true), statusWrite("True", "DiskLost", "disks data-a-1 (member a-1) are being deleted"), ""},
		{"deleted, not reported", f, pod(false), claim("data-a-1", corev1.ClaimBound, true), healthy, "wrote Degraded False"},
		{"lost, not reported", f, pod(false), claim("data-a-1", corev1.ClaimLost, false), healthy, "wrote Degraded False"},
		{"reported without the claim's name", f, pod(false), claim("data-a-1", corev1.ClaimLost, false), statusWrite("True", "DiskLost", "a disk is lost"), "does not name one of the claims [data-a-1]"},
		{"another Degraded reason", f, pod(false), claim("data-a-1", corev1.ClaimLost, false), statusWrite("True", "MemberUnreachable", "member a-1 on n1"), ""},
		{"a terminating member's claim", f, pod(true), claim("data-a-1", corev1.ClaimBound, true), healthy, ""},
		{"a claim no member mounts", f, pod(false), claim("data-a-7", corev1.ClaimBound, true), healthy, ""},
		{"a bound claim", f, pod(false), claim("data-a-1", corev1.ClaimBound, false), healthy, ""},
		{"the fleet being deleted", deleting, pod(false), claim("data-a-1", corev1.ClaimBound, true), healthy, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := judge.New(sim.New(sim.Options{}))
			err := j.DiskGoing(c.f, []*corev1.Pod{c.pod}, []*corev1.PersistentVolumeClaim{c.claim}, c.sent)
			wantReported(t, err, c.want)
		})
	}
}

// TestDeletionBlockedIsReported: a deleting fleet whose StatefulSet is at zero, no member
// terminating and two or more not ready, must write a Degraded status that, as DeletionBlocked,
// names the highest not ready and the lowest; one not ready, one terminating, or a workload not
// yet stopped asks for nothing.
func TestDeletionBlockedIsReported(t *testing.T) {
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid-a", DeletionTimestamp: &metav1.Time{Time: now}},
		Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfilePersistentFleet}}
	live := f.DeepCopy()
	live.DeletionTimestamp = nil
	zero, three := int32(0), int32(3)
	stopped := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: appsv1.StatefulSetSpec{Replicas: &zero}}
	running := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: appsv1.StatefulSetSpec{Replicas: &three}}
	pods := func(states string) []*corev1.Pod {
		var out []*corev1.Pod
		for i, s := range states {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("a-%d", i), Namespace: "ns", Labels: map[string]string{"celld.io/fleet-uid": "uid-a"}},
				Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
			switch s {
			case 'n':
				p.Status.Conditions[0].Status = corev1.ConditionFalse
			case 't':
				p.DeletionTimestamp = &metav1.Time{Time: now}
			}
			out = append(out, p)
		}
		return out
	}
	healthy := statusWrite("False", "Healthy", "")
	cases := []struct {
		name string
		f    *v1alpha1.CelldFleet
		set  *appsv1.StatefulSet
		pods string // per ordinal: r ready, n not ready, t terminating
		sent []sim.Request
		want string
	}{
		{"reported", f, stopped, "rnrn", statusWrite("True", "DeletionBlocked", "member a-3 waits on a-1"), ""},
		{"not reported", f, stopped, "rnrn", healthy, "cannot remove a-3 while a-1 is not ready"},
		{"not reported, the ready ones above still there", f, stopped, "nnrr", healthy, "cannot remove a-1 while a-0"},
		{"reported without the blocker", f, stopped, "rnrn", statusWrite("True", "DeletionBlocked", "member a-3 is blocked"), "does not name a-3 and a-1"},
		{"another Degraded reason", f, stopped, "rnrn", statusWrite("True", "MemberUnreachable", "member a-1 on n1"), ""},
		{"one not ready", f, stopped, "rrnr", healthy, ""},
		{"a member terminating", f, stopped, "nnrt", healthy, ""},
		{"the workload not stopped yet", f, running, "rnrn", healthy, ""},
		{"a live fleet", live, stopped, "rnrn", healthy, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := judge.New(sim.New(sim.Options{}))
			err := j.DeletionBlocked(c.f, c.set, pods(c.pods), c.sent)
			wantReported(t, err, c.want)
		})
	}
}

// TestCannotComeBackIsReported: a pass with a member on a gone or fenced node and another member
// not ready (or two such members) must write a Degraded status that, as MemberCannotComeBack,
// names one of them; alone, or in a fleet being deleted, it asks for nothing.
func TestCannotComeBackIsReported(t *testing.T) {
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid-a"},
		Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfilePersistentFleet}}
	deleting := f.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	sleeping := f.DeepCopy()
	sleeping.Spec.Hibernate = true
	// per member: its node (n0 gone, f fenced, h healthy) and r ready or n not ready.
	pods := func(members ...string) []*corev1.Pod {
		var out []*corev1.Pod
		for i, m := range members {
			node := map[byte]string{'g': "n0", 'f': "nf", 'h': "nh"}[m[0]]
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("a-%d", i), Namespace: "ns", Labels: map[string]string{"celld.io/fleet-uid": "uid-a"}},
				Spec:   corev1.PodSpec{NodeName: node},
				Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
			if m[1] == 'n' {
				p.Status.Conditions[0].Status = corev1.ConditionFalse
			}
			out = append(out, p)
		}
		return out
	}
	nodes := map[string]*corev1.Node{
		"nf": {ObjectMeta: metav1.ObjectMeta{Name: "nf"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}}}},
		"nh": {ObjectMeta: metav1.ObjectMeta{Name: "nh"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}},
	}
	healthy := statusWrite("False", "Healthy", "")
	cases := []struct {
		name    string
		f       *v1alpha1.CelldFleet
		members []string
		sent    []sim.Request
		want    string
	}{
		{"reported", f, []string{"gr", "hr", "hn"}, statusWrite("True", "MemberCannotComeBack", "member a-0 cannot come back"), ""},
		{"not reported, node gone", f, []string{"gr", "hr", "hn"}, healthy, "wrote Degraded False"},
		{"not reported, node fenced", f, []string{"hr", "fr", "hn"}, healthy, "wrote Degraded False"},
		{"not reported, two lost", f, []string{"gr", "fr", "hr"}, healthy, "wrote Degraded False"},
		{"reported without the member", f, []string{"gr", "hr", "hn"}, statusWrite("True", "MemberCannotComeBack", "member a-2 is not ready"), "does not name one of the members [a-0]"},
		{"another Degraded reason", f, []string{"gr", "hr", "hn"}, statusWrite("True", "MemberUnreachable", "a-2 on nh"), ""},
		{"the others ready", f, []string{"gn", "hr", "hr"}, healthy, ""},
		{"nobody lost", f, []string{"hn", "hr", "hn"}, healthy, ""},
		{"the fleet being deleted", deleting, []string{"gr", "hr", "hn"}, healthy, ""},
		{"the fleet going to sleep", sleeping, []string{"gr", "hr", "hn"}, healthy, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := judge.New(sim.New(sim.Options{}))
			err := j.CannotComeBack(c.f, pods(c.members...), nodes, true, c.sent)
			wantReported(t, err, c.want)
		})
	}
}

// statusWrite is a pass's write of the fleet's status with that Degraded condition.
func statusWrite(degraded metav1.ConditionStatus, reason, message string) []sim.Request {
	st := &v1alpha1.CelldFleetStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionDegraded, Status: degraded, Reason: reason, Message: message}}}
	return []sim.Request{{Verb: "update", Resource: "celldfleets/status", Namespace: "ns", Name: "a", Status: st}}
}

// wantReported wants no violation when want is empty, else one of the reporting promise that
// says want.
func wantReported(t *testing.T, err error, want string) {
	t.Helper()
	var v *judge.Violation
	switch {
	case want == "" && err != nil:
		t.Errorf("want nothing to report, got %v", err)
	case want != "" && (!errors.As(err, &v) || v.Clause != judge.S6Reported || !strings.Contains(v.Detail, want)):
		t.Errorf("want a violation of %q saying %q, got %v", judge.S6Reported, want, err)
	}
}
