package contract

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// TestContractJudge: the contract checker, on hand-built histories, passes a lifecycle that keeps
// the contract and flags each way of breaking it: a step of two members, a scale-in before the
// rollout or with a member not ready, growth in two writes, a Pod or a claim deleted with nothing
// to explain it, a heal while another member is not ready, a member forced away from a node that
// may be alive. A healed member's replacement that the taint eviction controller evicts by name
// (before it has a node, or carrying that controller's mark) is no member taken away; the same
// deletion later, or once it has a node with no such mark, or of a Pod no heal replaced, is.
func TestContractJudge(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// story writes the history on top of a PersistentFleet at 9 members, rolled out, all
		// ready, asked to shrink to 3.
		story func(h *history)
		// want holds, for each violation expected in order, substrings it must contain; nothing
		// for a history that keeps the contract.
		want [][]string
	}{
		{"a lifecycle that keeps the contract", func(h *history) {
			h.step(8)
			h.goneAfterScaleDown(8)
			h.rolledOut(8)
			h.heal(0, "n9")
			h.deleteFleet()
		}, nil},
		{"two members in one write", func(h *history) {
			h.setReplicas(7, false)
		}, [][]string{{"clause 1: StatefulSet pf", "9->7: lowered by 2 in one write"}}},
		{"scale-in before the previous step rolled out", func(h *history) {
			h.step(8)
			h.goneAfterScaleDown(8)
			h.step(7)
		}, [][]string{{"clause 1: StatefulSet pf", "8->7 while the previous change had not rolled out"}}},
		{"scale-in with a member not ready", func(h *history) {
			h.setReady(3, false)
			h.step(8)
		}, [][]string{{"clause 1: StatefulSet pf", "9->8 while not every member was ready: ready [pf-0 pf-1 pf-2 pf-4 pf-5 pf-6 pf-7 pf-8], not ready or terminating [pf-3]"}}},
		{"scale-in with a member's node cordoned", func(h *history) {
			h.cordon(4, true)
			h.step(8)
		}, [][]string{{"clause 1: StatefulSet pf", "9->8 while members' nodes were cordoned [pf-4@n4]"}}},
		{"scale-in once the node is uncordoned", func(h *history) {
			h.cordon(4, true)
			h.cordon(4, false)
			h.step(8)
		}, nil},
		{"growth in two writes", func(h *history) {
			h.setMembers(12)
			h.setReplicas(10, false)
		}, [][]string{{"clause 2: StatefulSet pf", "9->10 while the fleet asked for 12"}}},
		{"a member deleted with nothing to explain it", func(h *history) {
			h.deletePod(2, true)
		}, [][]string{{"clause 3: Pod pf-2", "deleted with its fleet live"}}},
		{"a member healed while another is not ready", func(h *history) {
			h.setReady(4, false)
			h.heal(0, "n9")
		}, [][]string{{"clause 3: Pod pf-0", "node n0 is lost while other members were not ready or terminating: [pf-4]"}}},
		{"a member forced away from a node that is NotReady but not fenced", func(h *history) {
			h.forceOnUnfenced(2, "n9")
		}, [][]string{{"clause 3: Pod pf-2", "force-deleted on node n2, which is neither gone nor tainted out-of-service"}}},
		{"a healed member's replacement evicted by name before it had a node", func(h *history) {
			h.heal(0, "")
			h.deletePod(0, true)
		}, nil},
		{"a healed member's unscheduled replacement deleted long after the heal", func(h *history) {
			h.heal(0, "")
			h.at = h.at.Add(evictionRace)
			h.deletePod(0, true)
		}, [][]string{{"clause 3: Pod pf-0", "deleted with its fleet live"}}},
		{"a healed member's replacement deleted once it has a node", func(h *history) {
			h.heal(0, "n9")
			h.deletePod(0, true)
		}, [][]string{{"clause 3: Pod pf-0", "deleted with its fleet live"}}},
		{"a healed member's scheduled replacement evicted by name by the taint manager", func(h *history) {
			h.heal(0, "n9")
			h.taintManagerMarks(0, "DeletionByTaintManager")
			h.deletePod(0, true)
		}, nil},
		{"a healed member's scheduled replacement marked by another controller", func(h *history) {
			h.heal(0, "n9")
			h.taintManagerMarks(0, "PreemptionByScheduler")
			h.deletePod(0, true)
		}, [][]string{{"clause 3: Pod pf-0", "deleted with its fleet live"}}},
		{"a healed member's scheduled replacement evicted by the taint manager long after", func(h *history) {
			h.heal(0, "n9")
			h.at = h.at.Add(evictionRace)
			h.taintManagerMarks(0, "DeletionByTaintManager")
			h.deletePod(0, true)
		}, [][]string{{"clause 3: Pod pf-0", "deleted with its fleet live"}}},
		{"a member no heal replaced, marked by the taint manager on a healthy node", func(h *history) {
			h.heal(0, "n9")
			h.taintManagerMarks(3, "DeletionByTaintManager")
			h.deletePod(3, true)
		}, [][]string{{"clause 3: Pod pf-3", "deleted with its fleet live"}}},
		{"an unscheduled member deleted that no heal replaced", func(h *history) {
			h.heal(0, "")
			p := h.pods[3].DeepCopy()
			p.Spec.NodeName = ""
			h.pods[3] = h.write(watch.Modified, p).(*corev1.Pod)
			h.deletePod(3, true)
		}, [][]string{{"clause 3: Pod pf-3", "deleted with its fleet live"}}},
		{"a claim deleted while its fleet is live", func(h *history) {
			h.deleteClaim(8)
		}, [][]string{
			{"clause 4: PersistentVolumeClaim data-pf-8", "while its fleet pf was live"},
			{"clause 4: PersistentVolumeClaim data-pf-8", "while member Pods of its fleet pf still existed"},
		}},
		{"a claim deleted before the last member is gone", func(h *history) {
			h.markFleetDeleting()
			h.deleteClaim(8)
		}, [][]string{{"clause 4: PersistentVolumeClaim data-pf-8", "member Pods of its fleet pf still existed: [pf-0 pf-1 pf-2 pf-3 pf-4 pf-5 pf-6 pf-7 pf-8]"}}},
		{"the StatefulSet created again over its members, at their number", func(h *history) {
			h.setMembers(9)
			h.recreate(9)
		}, nil},
		{"the StatefulSet created again over its members, at fewer", func(h *history) {
			h.recreate(3)
		}, [][]string{{"clause 1: StatefulSet pf", "9->3: lowered by 6 in one write"}, {"clause 1: StatefulSet pf", "created over members that outlived the last one"}}},
		{"claims grown", func(h *history) {
			h.resizeClaim(0, "1Gi")
			h.resizeClaim(0, "2Gi")
		}, nil},
		{"a claim's request lowered", func(h *history) {
			h.resizeClaim(0, "2Gi")
			h.resizeClaim(0, "1Gi")
		}, [][]string{{"clause 4: PersistentVolumeClaim data-pf-0", "storage request lowered 2Gi->1Gi"}}},
		{"hibernation stops every member at once and keeps the claims", func(h *history) {
			h.setHibernate(true)
			h.stopWorkload()
		}, nil},
		{"every member stopped at once without hibernation", func(h *history) {
			h.stopWorkload()
		}, stoppedUnasked(9)},
		{"a woken fleet's workload stopped again after the wake", func(h *history) {
			h.setHibernate(true)
			h.setHibernate(false)
			h.stopWorkload()
		}, stoppedUnasked(9)},
		{"a claim that is no fleet's", func(h *history) {
			c := h.claims[0].DeepCopy()
			delete(c.Labels, kinds.LabelFleetUID)
			h.claims[0] = h.write(watch.Modified, c).(*corev1.PersistentVolumeClaim)
			h.deleteClaim(0)
		}, [][]string{{"clause 4: PersistentVolumeClaim data-pf-0", "it is no fleet's own claim"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHistory(t, 9, 3)
			c.story(h)
			v := Judge(h.entries, h.requests)
			t.Logf("%d checks; %s", v.Checks, v.Summary())
			if v.Checks == 0 {
				t.Errorf("no check made")
			}
			matchViolations(t, v.Violations, c.want)
		})
	}

	t.Run("deployment", func(t *testing.T) {
		h := newDeploymentHistory(t)
		h.write(watch.Modified, h.fleetObj(2, false))
		h.write(watch.Modified, h.deployment(2, true))
		rs := h.rs.DeepCopy()
		rs.Spec.Replicas = ptr(int32(2))
		h.write(watch.Modified, rs)
		h.deletePod(2, true)
		// The ReplicaSet is at 2 with 2 Pods: another deletion is nobody's scale-down.
		h.deletePod(1, true)
		v := Judge(h.entries, nil)
		t.Logf("%d checks; %s", v.Checks, v.Summary())
		matchViolations(t, v.Violations, [][]string{{"clause 3: Pod bk-1", "deleted with its fleet live"}})
		if v.Explained["Pod: scale-down"] != 1 {
			t.Errorf("Pods explained by a scale-down: %d, want 1", v.Explained["Pod: scale-down"])
		}
	})
}

// matchViolations wants the violations found to be those expected, in order.
func matchViolations(t *testing.T, got []string, want [][]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("want %d violations, got %d:\n%s", len(want), len(got), strings.Join(got, "\n"))
		return
	}
	for i, w := range want {
		for _, part := range w {
			if !strings.Contains(got[i], part) {
				t.Errorf("violation %q does not say %q", got[i], part)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// history builds a recorded history by hand: every write gets the next resource version.
type history struct {
	t       *testing.T
	rv      uint64
	at      time.Time
	entries []Entry
	// requests are what the API server's audit log recorded.
	requests []Request

	fleet  *v1alpha1.CelldFleet
	set    *appsv1.StatefulSet
	rs     *appsv1.ReplicaSet
	dep    *appsv1.Deployment
	pods   []*corev1.Pod // by ordinal, nil once deleted
	claims []*corev1.PersistentVolumeClaim
	nodes  []*corev1.Node
	uids   int
}

func (h *history) uid(prefix string) types.UID {
	h.uids++
	return types.UID(fmt.Sprintf("%s-uid-%d", prefix, h.uids))
}

// write records one version of an object, as a watch would deliver it, and returns it.
func (h *history) write(typ watch.EventType, o runtime.Object) runtime.Object {
	h.t.Helper()
	return h.add(typ, o, false)
}

func (h *history) add(typ watch.EventType, o runtime.Object, initial bool) runtime.Object {
	o = o.DeepCopyObject()
	h.rv++
	h.at = h.at.Add(10 * time.Millisecond)
	s := Seen{At: h.at, Type: typ, Obj: o}
	s.Meta().SetResourceVersion(fmt.Sprint(h.rv))
	h.entries = append(h.entries, Entry{Seen: s, Initial: initial})
	switch x := o.(type) {
	case *v1alpha1.CelldFleet:
		h.fleet = x
	case *appsv1.StatefulSet:
		h.set = x
	case *appsv1.Deployment:
		h.dep = x
	case *appsv1.ReplicaSet:
		h.rs = x
	}
	return o
}

func newNodes(h *history, n int) {
	for i := 0; i < n; i++ {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), UID: h.uid("node")},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		h.nodes = append(h.nodes, h.add(watch.Added, node, true).(*corev1.Node))
	}
}

// newHistory: a PersistentFleet created at `members`, grown in one write, rolled out with every
// member ready on its own node, then asked for `want` members.
func newHistory(t *testing.T, members, want int32) *history {
	h := &history{t: t, at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	newNodes(h, 10)
	fl := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "pf", UID: h.uid("fleet")},
		Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfilePersistentFleet, Members: members}}
	h.write(watch.Added, fl)
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "pf", UID: h.uid("sts"), Generation: 1, Labels: h.labels(),
		OwnerReferences: []metav1.OwnerReference{{Kind: "CelldFleet", Name: "pf", UID: fl.UID, Controller: ptr(true)}}},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr(members)}}
	h.write(watch.Added, s)
	for i := int32(0); i < members; i++ {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-pf-%d", i), UID: h.uid("claim"), Labels: h.labels()}}
		h.claims = append(h.claims, h.write(watch.Added, c).(*corev1.PersistentVolumeClaim))
		h.pods = append(h.pods, h.newPod(fmt.Sprintf("pf-%d", i), fmt.Sprintf("n%d", i), "StatefulSet", s.Name, s.UID))
	}
	h.rolledOut(members)
	h.setMembers(want)
	return h
}

func (h *history) labels() map[string]string {
	return map[string]string{kinds.LabelFleetUID: string(h.fleet.UID)}
}

func (h *history) newPod(name, node, ownerKind, owner string, ownerUID types.UID) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: h.uid("pod"), Labels: h.labels(),
		OwnerReferences: []metav1.OwnerReference{{Kind: ownerKind, Name: owner, UID: ownerUID, Controller: ptr(true)}}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	return h.write(watch.Added, p).(*corev1.Pod)
}

func (h *history) setMembers(n int32) {
	fl := h.fleet.DeepCopy()
	fl.Spec.Members = n
	h.write(watch.Modified, fl)
}

func (h *history) setHibernate(on bool) {
	fl := h.fleet.DeepCopy()
	fl.Spec.Hibernate = on
	h.write(watch.Modified, fl)
}

// stopWorkload: the StatefulSet deleted with propagation Background, then the garbage collector
// deletes every member; the claims, which it does not own, stay.
func (h *history) stopWorkload() {
	h.write(watch.Deleted, h.set.DeepCopy())
	for i := range h.pods {
		if h.pods[i] != nil {
			h.deletePod(i, true)
		}
	}
}

// stoppedUnasked is what the judge says of n members stopped at once by no request to hibernate.
func stoppedUnasked(n int) [][]string {
	var out [][]string
	for i := 0; i < n; i++ {
		out = append(out, []string{fmt.Sprintf("clause 3: Pod pf-%d", i), "deleted with its fleet live"})
	}
	return out
}

func (h *history) markFleetDeleting() {
	fl := h.fleet.DeepCopy()
	fl.DeletionTimestamp = &metav1.Time{Time: h.at}
	h.write(watch.Modified, fl)
}

// setReplicas writes the StatefulSet's spec.replicas; rolled out or not at that size.
func (h *history) setReplicas(n int32, rolled bool) {
	s := h.set.DeepCopy()
	s.Spec.Replicas = ptr(n)
	s.Generation++
	if rolled {
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: n, ReadyReplicas: n, UpdatedReplicas: n}
	}
	h.write(watch.Modified, s)
}

func (h *history) step(n int32)      { h.setReplicas(n, false) }
func (h *history) rolledOut(n int32) { h.setReplicas(n, true) }

func (h *history) setReady(i int, ready bool) {
	p := h.pods[i].DeepCopy()
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	if ready {
		p.Status.Conditions[0].Status = corev1.ConditionTrue
	}
	h.pods[i] = h.write(watch.Modified, p).(*corev1.Pod)
}

// deletePod deletes a member: gracefully (deletion requested, then gone), or forced (gone at once).
func (h *history) deletePod(i int, graceful bool) {
	p := h.pods[i].DeepCopy()
	if graceful {
		p.DeletionTimestamp = &metav1.Time{Time: h.at}
		p = h.write(watch.Modified, p).(*corev1.Pod)
	}
	h.write(watch.Deleted, p)
	h.pods[i] = nil
}

func (h *history) goneAfterScaleDown(i int) { h.deletePod(i, true) }

// taintManagerMarks: member i gets the DisruptionTarget condition, with the reason given, that
// the taint eviction controller writes before it deletes a Pod by name.
func (h *history) taintManagerMarks(i int, reason string) {
	p := h.pods[i].DeepCopy()
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason})
	h.pods[i] = h.write(watch.Modified, p).(*corev1.Pod)
}

// heal: member i's node turns NotReady and is fenced (tainted out-of-service), the member is
// force-deleted and comes back on another node.
func (h *history) heal(i int, to string) {
	h.nodeDown(i, true)
	h.deletePod(i, false)
	h.pods[i] = h.newPod(fmt.Sprintf("pf-%d", i), to, "StatefulSet", h.set.Name, h.set.UID)
}

// nodeDown: member i's node turns NotReady, and is then fenced if asked.
func (h *history) nodeDown(i int, fenced bool) {
	n := h.nodes[i].DeepCopy()
	n.Status.Conditions[0].Status = corev1.ConditionUnknown
	h.nodes[i] = h.write(watch.Modified, n).(*corev1.Node)
	if fenced {
		n = n.DeepCopy()
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
		h.nodes[i] = h.write(watch.Modified, n).(*corev1.Node)
	}
}

// cordon marks member i's node unschedulable, or not, as a drain and an uncordon do.
func (h *history) cordon(i int, on bool) {
	n := h.nodes[i].DeepCopy()
	n.Spec.Unschedulable = on
	h.nodes[i] = h.write(watch.Modified, n).(*corev1.Node)
}

// forceOnUnfenced: member i's node turns NotReady, and the member is force-deleted with its node
// neither gone nor fenced.
func (h *history) forceOnUnfenced(i int, to string) {
	h.nodeDown(i, false)
	h.deletePod(i, false)
	h.pods[i] = h.newPod(fmt.Sprintf("pf-%d", i), to, "StatefulSet", h.set.Name, h.set.UID)
}

// recreate deletes the StatefulSet with propagation Orphan (its members stay) and creates it
// again at n replicas.
func (h *history) recreate(n int32) {
	old := h.set.DeepCopy()
	h.write(watch.Deleted, old)
	s := old.DeepCopy()
	s.UID, s.Generation, s.Spec.Replicas, s.Status = h.uid("sts"), 1, ptr(n), appsv1.StatefulSetStatus{}
	h.write(watch.Added, s)
}

func (h *history) resizeClaim(i int, size string) {
	c := h.claims[i].DeepCopy()
	c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
	h.claims[i] = h.write(watch.Modified, c).(*corev1.PersistentVolumeClaim)
}

func (h *history) deleteClaim(i int) {
	c := h.claims[i].DeepCopy()
	c.DeletionTimestamp = &metav1.Time{Time: h.at}
	h.write(watch.Modified, c)
	h.write(watch.Deleted, c)
}

// deleteFleet: deletion requested, the workload stopped, the members gone, then the claims.
func (h *history) deleteFleet() {
	h.markFleetDeleting()
	h.step(0)
	for i := range h.pods {
		if h.pods[i] != nil {
			h.deletePod(i, true)
		}
	}
	for i := range h.claims {
		h.deleteClaim(i)
	}
	h.write(watch.Deleted, h.fleet)
}

// newDeploymentHistory: a Bucket fleet of 3 members run by a Deployment, rolled out.
func newDeploymentHistory(t *testing.T) *history {
	h := &history{t: t, at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	newNodes(h, 4)
	fl := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "bk", UID: h.uid("fleet")},
		Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfileBucket, Members: 3}}
	h.write(watch.Added, fl)
	h.write(watch.Added, h.deployment(3, false))
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "bk-abc", UID: h.uid("rs"), Labels: h.labels()},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(3))}}
	h.write(watch.Added, rs)
	for i := 0; i < 3; i++ {
		h.pods = append(h.pods, h.newPod(fmt.Sprintf("bk-%d", i), fmt.Sprintf("n%d", i), "ReplicaSet", rs.Name, rs.UID))
	}
	h.write(watch.Modified, h.deployment(3, true))
	return h
}

func (h *history) fleetObj(members int32, deleting bool) *v1alpha1.CelldFleet {
	fl := h.fleet.DeepCopy()
	fl.Spec.Members = members
	if deleting {
		fl.DeletionTimestamp = &metav1.Time{Time: h.at}
	}
	return fl
}

func (h *history) deployment(n int32, rolled bool) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "bk", Generation: 1, Labels: h.labels(),
		OwnerReferences: []metav1.OwnerReference{{Kind: "CelldFleet", Name: "bk", UID: h.fleet.UID, Controller: ptr(true)}}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(n)}}
	if h.dep != nil {
		d.UID, d.Generation = h.dep.UID, h.dep.Generation
		if *h.dep.Spec.Replicas != n {
			d.Generation++
		}
	} else {
		d.UID = h.uid("deploy")
	}
	if rolled {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, ReadyReplicas: n, UpdatedReplicas: n}
	}
	return d
}
