package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/contract"
)

// The node tests are not parallel: Go runs them alone, before every parallel test, so no other
// test's member is on the node they take away.

// TestUnreachableNodeFencedThenHealed: a PersistentFleet member whose node stays unreachable
// past the grace period is not deleted, forced or otherwise: the node may be cut off but alive and
// still running it. The fleet says Degraded=MemberUnreachable, naming the member, the node and the
// taint that unblocks it. Once the node is tainted out-of-service, the member is replaced (by the
// operator or by Kubernetes' own Pod collector), it alone, on its own disk.
func TestUnreachableNodeFencedThenHealed(t *testing.T) {
	f := newFixture(t)
	op := f.startOperator()
	fl, victim, claim, gone := f.unreachableMember(op, "fenced")
	node := victim.Spec.NodeName
	pods, claims := f.recordPods(), f.recordClaims()

	t.Cleanup(func() { untaintNode(t, node, corev1.TaintNodeOutOfService) })
	fenceNode(t, node)
	t.Logf("node %s tainted %s", node, corev1.TaintNodeOutOfService)

	f.waitReplaced(fl, victim)
	f.checkOnlyVictimHealed(pods, claims, fl, victim, claim, gone)
	total, by := op.heals(t)
	t.Logf("heals by the operator: %g%s (Kubernetes' Pod collector may have come first)", total, formatSeries(by))
	if total > 1 || total != by[`{reason="NodeFenced"}`]+by[`{reason="StuckTerminating"}`] {
		t.Errorf("heals_total: %g%s; want at most one, for the fenced node", total, formatSeries(by))
	}
}

// TestUnreachableNodeDeletedThenHealed: the same member, and its Node deleted instead of tainted
// (the machine is gone): the member is replaced, it alone, on its own disk.
func TestUnreachableNodeDeletedThenHealed(t *testing.T) {
	f := newFixture(t)
	op := f.startOperator()
	fl, victim, claim, gone := f.unreachableMember(op, "node-deleted")
	pods, claims := f.recordPods(), f.recordClaims()

	saved, err := suite.kube.CoreV1().Nodes().Get(f.ctx, victim.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// kwok must hold the node's lease again before the node it recreates can turn Ready.
		nodeScript(t, "ready", saved.Name)
		restoreNode(t, saved)
	})
	if err := suite.kube.CoreV1().Nodes().Delete(f.ctx, saved.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s deleted", saved.Name)
	f.waitReplaced(fl, victim)
	f.checkOnlyVictimHealed(pods, claims, fl, victim, claim, gone)
}

// TestUnreachableDeploymentMemberReplacedGracefully: a Bucket fleet's Deployment member on an
// unreachable node has no identity to share: past the grace period it is deleted gracefully,
// never forced, and its ReplicaSet starts another. The old Pod stays terminating on the node that
// does not answer, and the fleet says so.
func TestUnreachableDeploymentMemberReplacedGracefully(t *testing.T) {
	f := newFixture(t)
	op := f.startOperator()
	const grace = 10 * time.Second
	fl := f.newFleet("deploy-unreachable", v1alpha1.ProfileBucket, 3)
	fl.Spec.Workload = v1alpha1.WorkloadDeployment
	fl.Spec.Healing.UnreachableGracePeriod = duration(grace)
	f.keepToItself(fl)
	fl = f.create(fl)
	f.waitConverged(fl.Name)
	victim := f.members(fl)[0]
	node := victim.Spec.NodeName
	pods := f.recordPods()
	since := silenceNode(t, node)
	t.Logf("node %s of member %s NotReady since %s", node, victim.Name, since.Format(time.RFC3339))

	// kwok stands in for the silenced node's kubelet, and it may finish the operator's graceful
	// delete at once although the node no longer heartbeats (the member is then gone, and the
	// fleet no longer Degraded for it): who removed the member is judged by the API server's
	// audit record, and only kwok's removal is let pass.
	var removed []auditDelete
	kwokFinished := false
	f.waitFleet(fl.Name, converge, "three ready members besides the terminating one, Degraded=MemberUnreachable", func(cur *v1alpha1.CelldFleet) bool {
		ready := 0
		for _, p := range f.members(fl) {
			if p.DeletionTimestamp == nil && podReady(&p) && p.Spec.NodeName != node {
				ready++
			}
		}
		if d := deletions(pods.Events(t))[victim.UID]; !d.gone.IsZero() {
			dels := auditDeletes(t, "pods", f.ns)[victim.Name]
			i := slices.IndexFunc(dels, forced)
			if i < 0 {
				// The record of the delete may trail the watch event by a moment.
				return false
			}
			removed, kwokFinished = dels, dels[i].byKwok()
			return !kwokFinished || ready == 3
		}
		c := condition(cur, v1alpha1.ConditionDegraded)
		return ready == 3 && c.Reason == "MemberUnreachable" && strings.Contains(c.Message, victim.Name)
	})
	switch {
	case removed != nil && !kwokFinished:
		t.Fatalf("%s removed at once, by someone other than kwok, while its node may be alive; deletes: %v%s", victim.Name, removed, timeline(pods.Events(t), victim.Name))
	case kwokFinished:
		t.Logf("kwok, standing in for the silenced node's kubelet, finished the graceful delete of %s: %v; that it stays terminating is not exercised in this run", victim.Name, removed)
	}
	var first *corev1.Pod
	for _, e := range pods.Events(t) {
		if p, ok := e.Obj.(*corev1.Pod); ok && p.UID == victim.UID && (p.DeletionTimestamp != nil || e.Type == watch.Deleted) {
			first = p
			break
		}
	}
	switch {
	case first == nil:
		t.Fatalf("member %s was never deleted%s", victim.Name, timeline(pods.Events(t), victim.Name))
	case first.DeletionGracePeriodSeconds == nil || *first.DeletionGracePeriodSeconds == 0:
		t.Errorf("member %s was deleted without a grace period (forced) on a node that may be alive%s", victim.Name, timeline(pods.Events(t), victim.Name))
	case first.DeletionTimestamp.Time.Before(since.Add(grace).Truncate(time.Second)):
		t.Errorf("member %s deleted at %s, within the grace period after %s", victim.Name, first.DeletionTimestamp.Time, since)
	}
	if d := deletions(pods.Events(t)); len(d) != 1 || (!d[victim.UID].gone.IsZero() && !kwokFinished) {
		t.Errorf("Pods deleted: %v; want only %s, still terminating on its unreachable node%s", names(d), victim.Name, timeline(pods.Events(t), victim.Name))
	}
	if total, by := op.heals(t); total != 1 || by[`{reason="NodeUnreachable"}`] != 1 {
		t.Errorf("heals_total: %g%s; want one graceful NodeUnreachable", total, formatSeries(by))
	}
}

// unreachableMember makes the node of one member of a new three-member PersistentFleet
// unreachable, waits until the fleet says so, and checks for a while that nothing is deleted and
// the workload keeps its size. It returns the fleet, the member, the member's claim, and whether
// the member is gone already (kwok finished a controller's eviction of it).
func (f *fixture) unreachableMember(op *operator, name string) (*v1alpha1.CelldFleet, corev1.Pod, *corev1.PersistentVolumeClaim, bool) {
	t := f.t
	t.Helper()
	const grace = 10 * time.Second
	fl := f.newFleet(name, v1alpha1.ProfilePersistentFleet, 3)
	fl.Spec.Healing.UnreachableGracePeriod = duration(grace)
	f.keepToItself(fl)
	fl = f.create(fl)
	f.waitConverged(fl.Name)

	victim := f.members(fl)[1]
	node := victim.Spec.NodeName
	claim, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Get(f.ctx, "data-"+victim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("claim of %s: %v", victim.Name, err)
	}
	pods, claims := f.recordPods(), f.recordClaims()
	since := silenceNode(t, node)
	t.Logf("node %s of member %s (%s) NotReady since %s", node, victim.Name, victim.UID, since.Format(time.RFC3339))

	cur := f.waitFleet(fl.Name, time.Minute, "Degraded=MemberUnreachable naming the member, its node and the fencing taint", func(cur *v1alpha1.CelldFleet) bool {
		c := condition(cur, v1alpha1.ConditionDegraded)
		return c.Status == metav1.ConditionTrue && c.Reason == "MemberUnreachable" && strings.Contains(c.Message, victim.Name) &&
			strings.Contains(c.Message, node) && strings.Contains(c.Message, corev1.TaintNodeOutOfService) &&
			strings.Contains(cur.Status.BlockedBy, corev1.TaintNodeOutOfService)
	})
	if at := condition(cur, v1alpha1.ConditionDegraded).LastTransitionTime.Time; at.Before(since.Add(grace).Truncate(time.Second)) {
		t.Errorf("Degraded=MemberUnreachable at %s, within the grace period after %s", at, since)
	}
	t.Logf("fleet says: %s", condition(cur, v1alpha1.ConditionDegraded).Message)
	// Nothing is forced away while the node may be alive: give a would-be heal a few grace
	// periods. The node lifecycle controller may evict the member gracefully meanwhile (this
	// control plane's default toleration is 30s): its Pod then stays terminating, as no kubelet
	// answers for it.
	sts := f.statefulSet(fl.Name)
	var finished []auditDelete
	f.holds(3*grace, "nothing deleted by the operator, nothing forced away, the workload's size kept, while the node may be alive", func() error {
		for uid, d := range deletions(pods.Events(t)) {
			if uid != victim.UID {
				return fmt.Errorf("Pods deleted: %v%s", names(deletions(pods.Events(t))), timeline(pods.Events(t), victim.Name))
			}
			if d.gone.IsZero() || finished != nil {
				continue
			}
			// The victim is gone: by the API server's record, who removed it. Its record of the
			// delete may trail the watch event by a moment.
			var dels []auditDelete
			for end := time.Now().Add(10 * time.Second); ; time.Sleep(poll) {
				dels = auditDeletes(t, "pods", f.ns)[victim.Name]
				if i := slices.IndexFunc(dels, forced); i >= 0 || time.Now().After(end) {
					break
				}
			}
			i := slices.IndexFunc(dels, forced)
			if i < 0 || !dels[i].byKwok() {
				return fmt.Errorf("%s removed while its node may be alive; deletes: %v%s", victim.Name, dels, timeline(pods.Events(t), victim.Name))
			}
			finished = dels
		}
		// A StatefulSet's member on a node that may be alive is not the operator's to delete,
		// gracefully or not: only a controller's eviction may mark it.
		for m, dels := range auditDeletes(t, "pods", f.ns) {
			for _, d := range dels {
				if d.byOperator() {
					return fmt.Errorf("the operator deleted %s: %v%s", m, d, timeline(pods.Events(t), m))
				}
			}
		}
		if d := deletions(claims.Events(t)); len(d) != 0 {
			return fmt.Errorf("claims deleted: %v", names(d))
		}
		if s := f.statefulSet(fl.Name); *s.Spec.Replicas != *sts.Spec.Replicas {
			return fmt.Errorf("StatefulSet replicas %d -> %d", *sts.Spec.Replicas, *s.Spec.Replicas)
		}
		return nil
	})
	if total, by := op.heals(t); total != 0 {
		t.Errorf("heals_total: %g%s while the node may be alive; want none", total, formatSeries(by))
	}
	if finished != nil {
		// kwok stands in for the kubelet of a node it stopped heartbeating: it should not act on
		// its Pods either. When it does, the member is gone before any fencing, and what follows
		// checks only that it came back.
		t.Logf("kwok, standing in for the silenced node's kubelet, finished the eviction of %s: %v; the fencing heal is not exercised in this run", victim.Name, finished)
	}
	return fl, victim, claim, finished != nil
}

// forced: a delete that removed the object at once (no grace period), answered.
func forced(d auditDelete) bool { return d.grace != nil && *d.grace == 0 && d.code < 300 }

// checkOnlyVictimHealed: the victim alone went (or nothing, when it was gone before the
// recorders started), no claim was deleted, and the member that took its place runs on the
// victim's own claim.
//
// Kubernetes' own controllers may take its replacement too: the taint eviction controller and
// the Pod collector queue a Pod of the fenced node by name, and the delete they send late, by
// name alone, takes the replacement of the same name if it was already created. That is theirs,
// not the operator's: by the API server's audit record every delete the operator sent named the
// victim's UID in its preconditions, and any other Pod deleted was deleted by someone else.
func (f *fixture) checkOnlyVictimHealed(pods, claims *recorder, fl *v1alpha1.CelldFleet, victim corev1.Pod, claim *corev1.PersistentVolumeClaim, goneBefore bool) {
	t := f.t
	t.Helper()
	var dels map[types.UID]deletion
	if goneBefore {
		dels = deletions(pods.Events(t))
	} else {
		dels = deletions(pods.Await(t, "the victim gone", gone(victim.UID)))
		if dels[victim.UID].name == "" {
			t.Errorf("Pods deleted: %v; want %s (%s) among them", names(dels), victim.Name, victim.UID)
		}
	}
	audit := auditDeletes(t, "pods", f.ns)
	for name, ds := range audit {
		for _, d := range ds {
			if d.byOperator() && d.uid != victim.UID {
				t.Errorf("the operator deleted %s naming UID %q; want only %s (%s), by its UID%s", name, d.uid, victim.Name, victim.UID, timeline(pods.Events(t), name))
			}
		}
	}
	for uid, d := range dels {
		if uid == victim.UID {
			continue
		}
		if d.name != victim.Name {
			t.Errorf("Pods deleted: %v; want only %s (%s)%s", names(dels), victim.Name, victim.UID, timeline(pods.Events(t), d.name))
			continue
		}
		t.Logf("replacement %s (%s) deleted too, not by the operator; deletes of its name: %v", d.name, uid, audit[d.name])
	}
	if d := deletions(claims.Events(t)); len(d) != 0 {
		t.Errorf("claims deleted: %v; want none", names(d))
	}
	now, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Get(f.ctx, claim.Name, metav1.GetOptions{})
	if err != nil || now.UID != claim.UID {
		t.Errorf("claim %s after the heal: %v (uid %v, want %s)", claim.Name, err, now, claim.UID)
	}
	for _, p := range f.members(fl) {
		if p.Name != victim.Name {
			continue
		}
		for _, vol := range p.Spec.Volumes {
			if pvc := vol.PersistentVolumeClaim; pvc != nil && pvc.ClaimName != claim.Name {
				t.Errorf("replacement %s mounts claim %s, want %s", p.Name, pvc.ClaimName, claim.Name)
			}
		}
	}
}

// silenceNode stops a node's heartbeats until the test ends, and returns when it turned NotReady.
func silenceNode(t *testing.T, node string) time.Time {
	t.Helper()
	t.Cleanup(func() {
		nodeScript(t, "ready", node)
		waitNode(t, node, 2*time.Minute, "Ready and untainted", contract.NodeHealthy)
	})
	n := takeNodeAway(t, node)
	return readyCondition(n).LastTransitionTime.Time
}

// takeNodeAway takes over a node's lease (cluster/node.sh not-ready) and returns the node once
// the node lifecycle controller judged it NotReady, which it does one grace period (20s here)
// after it last saw the lease renewed. A takeover the controller did not act on within twice that
// is logged with what the lease and the controller's log say, and made once more: the wait is for
// the controller, and a test that fails on it says why.
func takeNodeAway(t *testing.T, node string) *corev1.Node {
	t.Helper()
	const firstTry = 45 * time.Second
	away := func(n *corev1.Node) bool { return !contract.NodeHealthy(n) }
	nodeScript(t, "not-ready", node)
	if n, err := pollNode(node, firstTry, away); err == nil {
		return n
	}
	t.Logf("node %s still Ready %s after its lease was taken over: %s; taking it over again", node, firstTry, nodeLifecycleClues(node))
	nodeScript(t, "not-ready", node)
	n, err := pollNode(node, time.Minute, away)
	if err != nil {
		t.Fatalf("node %s: not NotReady %s after its lease was taken over twice: %s\nlast seen:\n%s", node, firstTry+time.Minute, nodeLifecycleClues(node), toYAML(n))
	}
	return n
}

// nodeLifecycleClues: the node's lease, and the last lines of kube-controller-manager's log.
func nodeLifecycleClues(node string) string {
	var sb strings.Builder
	l, err := suite.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), node, metav1.GetOptions{})
	switch {
	case err != nil:
		fmt.Fprintf(&sb, "lease: %v", err)
	default:
		holder := "<none>"
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		fmt.Fprintf(&sb, "lease holder %s, renewed %v", holder, l.Spec.RenewTime)
	}
	fmt.Fprintf(&sb, "; kube-controller-manager's log (last lines):\n%s", tail(filepath.Join(filepath.Dir(suite.auditLog), "kube-controller-manager.log"), 20))
	return sb.String()
}

// pollNode waits until ok holds for the node, and returns the node as last seen either way.
func pollNode(name string, timeout time.Duration, ok func(*corev1.Node) bool) (*corev1.Node, error) {
	var last *corev1.Node
	err := wait.PollUntilContextTimeout(context.Background(), poll, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := suite.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n
		return ok(n), nil
	})
	return last, err
}

// fenceNode taints a node out-of-service, as its administrator does once the machine is off.
func fenceNode(t *testing.T, name string) {
	t.Helper()
	taint := corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
	err := wait.PollUntilContextTimeout(context.Background(), poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := suite.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, x := range n.Spec.Taints {
			if x.Key == taint.Key {
				return true, nil
			}
		}
		n.Spec.Taints = append(n.Spec.Taints, taint)
		_, err = suite.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("taint node %s out-of-service: %v", name, err)
	}
}

// untaintNode removes a taint by key, whatever its value and effect.
func untaintNode(t *testing.T, name, key string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := suite.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, nil
		}
		var keep []corev1.Taint
		for _, x := range n.Spec.Taints {
			if x.Key != key {
				keep = append(keep, x)
			}
		}
		if len(keep) == len(n.Spec.Taints) {
			return true, nil
		}
		n.Spec.Taints = keep
		_, err = suite.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Errorf("untaint node %s: %v", name, err)
	}
}

// TestHealNodeDeleted: a member whose node is deleted is replaced at once, and it is the only Pod
// deleted.
func TestHealNodeDeleted(t *testing.T) {
	f := newFixture(t)
	op := f.startOperator()
	fl := f.newFleet("node-gone", v1alpha1.ProfileBucket, 3)
	f.keepToItself(fl)
	fl = f.create(fl)
	f.waitConverged(fl.Name)

	victim := f.members(fl)[0]
	saved, err := suite.kube.CoreV1().Nodes().Get(f.ctx, victim.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := f.recordPods()
	t.Cleanup(func() { restoreNode(t, saved) })
	if err := suite.kube.CoreV1().Nodes().Delete(f.ctx, saved.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	t.Logf("node %s of member %s (%s) deleted", saved.Name, victim.Name, victim.UID)

	f.waitReplaced(fl, victim)
	dels := deletions(pods.Await(t, "the victim gone", gone(victim.UID)))
	if d, ok := dels[victim.UID]; len(dels) != 1 || !ok {
		t.Errorf("Pods deleted: %v; want only %s (%s)", names(dels), victim.Name, victim.UID)
	} else {
		t.Logf("%s deleted %s after its node", victim.Name, d.requested.Sub(deleted).Round(100*time.Millisecond))
	}
	if total, by := op.heals(t); total != 1 || by[`{reason="NodeGone"}`] != 1 {
		t.Errorf("heals_total: %g%s; want one NodeGone (the operator, not the pod garbage collector, replaced it)", total, formatSeries(by))
	}
}

// TestBrokenRolloutHealed: a template whose Pods never become ready stops the rollout at the last
// member; once the spec is fixed, the StatefulSet controller alone would wait for that member
// forever (kubernetes#67250), so the operator replaces it, and it alone.
//
// kwok makes every scheduled Pod ready whatever its image (the pod-ready stage selects on the
// phase and the Ready condition only), so the broken template asks for more CPU than any node has:
// its Pods stay Pending, never ready, as a crashing image's would.
func TestBrokenRolloutHealed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.startOperator()
	const grace = 10 * time.Second
	fl := f.newFleet("rollout", v1alpha1.ProfileBucket, 3)
	fl.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	fl.Spec.Healing.UnreachableGracePeriod = duration(grace)
	fl = f.create(fl)
	f.waitConverged(fl.Name)
	good := f.statefulSet(fl.Name).Status.UpdateRevision
	pods := f.recordPods()

	setCPU := func(q string) {
		f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(q) })
	}
	setCPU("1000")
	last := fl.Name + "-2"
	broken := f.waitPod(last, time.Minute, "on the new revision and unschedulable", func(p *corev1.Pod) bool {
		return p.Labels[appsv1.ControllerRevisionHashLabelKey] != good && unschedulable(p)
	})
	t.Logf("rollout stuck: %s (%s) on revision %s, unschedulable", broken.Name, broken.UID, broken.Labels[appsv1.ControllerRevisionHashLabelKey])
	f.waitFleet(fl.Name, time.Minute, "not Ready while the rollout is stuck", func(fl *v1alpha1.CelldFleet) bool {
		return fl.Status.ObservedGeneration == fl.Generation && condition(fl, v1alpha1.ConditionReady).Status == metav1.ConditionFalse
	})
	// A member stuck on the update revision would come back with the same template: replacing it
	// helps nothing, so the operator leaves it, past the grace period too.
	f.holds(grace+5*time.Second, "no heal while the stuck member is on the update revision", func() error {
		if total, by := op.heals(t); total != 0 {
			return fmt.Errorf("heals_total %g%s", total, formatSeries(by))
		}
		return nil
	})

	fixed := time.Now()
	setCPU("100m")
	fl = f.waitConverged(fl.Name)
	t.Logf("spec fixed; converged again %s later", time.Since(fixed).Round(100*time.Millisecond))
	s := f.statefulSet(fl.Name)
	if s.Status.CurrentRevision != s.Status.UpdateRevision || s.Status.UpdatedReplicas != 3 {
		t.Errorf("statefulset not rolled out: current %s update %s updated %d", s.Status.CurrentRevision, s.Status.UpdateRevision, s.Status.UpdatedReplicas)
	}
	if total, by := op.heals(t); total != 1 || by[`{reason="BrokenRollout"}`] != 1 {
		t.Errorf("heals_total: %g%s; want one BrokenRollout", total, formatSeries(by))
	}
	// The StatefulSet controller's rolling update deletes the last member (more than once when
	// its cache lags and it recreates it on the old revision first); the operator deletes the
	// broken member. The other members are never touched.
	evs := pods.Await(t, "the broken member gone", gone(broken.UID))
	t.Logf("%s, as seen:%s", last, timeline(evs, last))
	dels := deletions(evs)
	for uid, d := range dels {
		if d.name != last {
			t.Errorf("member %s (%s) deleted; only %s was to be replaced", d.name, uid, last)
		}
	}
	if d := dels[broken.UID]; d.requested.Before(fixed) {
		t.Errorf("the broken member was deleted %s before the spec was fixed", fixed.Sub(d.requested))
	}
}

// keepToItself keeps a fleet's members off the nodes that run Pods of other namespaces, so that
// taking a member's node away disturbs nobody else (make demo running alongside, say): kwok never
// makes a Pod that lived through the loss of its node ready again.
func (f *fixture) keepToItself(fl *v1alpha1.CelldFleet) {
	f.t.Helper()
	all, err := suite.kube.CoreV1().Pods(metav1.NamespaceAll).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	busy := map[string]bool{}
	for _, p := range all.Items {
		if p.Namespace != f.ns && p.Spec.NodeName != "" {
			busy[p.Spec.NodeName] = true
		}
	}
	nodes, err := suite.kube.CoreV1().Nodes().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	// The members spread one per node, and a replacement needs a node of its own too.
	if len(nodes.Items)-len(busy) < int(fl.Spec.Members)+1 {
		f.t.Logf("%d of %d nodes run other namespaces' Pods: the fleet shares them", len(busy), len(nodes.Items))
		return
	}
	if len(busy) == 0 {
		return // nothing to keep away from (and NotIn with no values is invalid)
	}
	var avoid []string
	for n := range busy {
		avoid = append(avoid, n)
	}
	sort.Strings(avoid)
	fl.Spec.Placement.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: avoid}},
		}}},
	}}
}

// waitReplaced waits until the fleet is converged again without the victim and with no member on
// the victim's node.
func (f *fixture) waitReplaced(fl *v1alpha1.CelldFleet, victim corev1.Pod) {
	f.t.Helper()
	var replacement string
	f.waitFleet(fl.Name, converge, fmt.Sprintf("member %s replaced off node %s", victim.Name, victim.Spec.NodeName), func(cur *v1alpha1.CelldFleet) bool {
		if !converged(cur) {
			return false
		}
		l, err := suite.kube.CoreV1().Pods(f.ns).List(f.ctx, metav1.ListOptions{LabelSelector: memberSelector(fl)})
		if err != nil || len(l.Items) != int(cur.Spec.Members) {
			return false
		}
		var on []string
		for i := range l.Items {
			p := &l.Items[i]
			if p.UID == victim.UID || p.Spec.NodeName == victim.Spec.NodeName || !podReady(p) {
				return false
			}
			on = append(on, p.Name+"@"+p.Spec.NodeName)
		}
		replacement = strings.Join(on, ", ")
		return true
	})
	f.t.Logf("members now: %s", replacement)
}

func (f *fixture) waitPod(name string, timeout time.Duration, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	f.t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(f.ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := suite.kube.CoreV1().Pods(f.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return ok(p), nil
	})
	if err != nil {
		f.t.Fatalf("pod %s: %s: not within %s\nlast seen:\n%s", name, what, timeout, toYAML(last))
	}
	return last
}

// holds checks that ok keeps holding for d, failing the test at the first violation. It asserts
// that something does not happen, which takes a window by nature.
func (f *fixture) holds(d time.Duration, what string, ok func() error) {
	f.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := ok(); err != nil {
			f.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(poll)
	}
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// --- nodes -------------------------------------------------------------------------------------

func readyCondition(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}
}

func waitNode(t *testing.T, name string, timeout time.Duration, what string, ok func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	last, err := pollNode(name, timeout, ok)
	if err != nil {
		t.Fatalf("node %s: %s: not within %s\nlast seen:\n%s", name, what, timeout, toYAML(last))
	}
	return last
}

// restoreNode brings a deleted fake node back as cluster/up.sh creates it: same labels and
// annotations (so kwok manages it again), and the same capacity. kwok gives a node it finds
// without a capacity one of its own, 1000 CPUs, on which the Pods other tests make unschedulable
// with a 1000-CPU request would run: so the capacity goes in with the create, and is set again
// until it holds should kwok's write race it.
func restoreNode(t *testing.T, saved *corev1.Node) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: saved.Name, Labels: saved.Labels, Annotations: saved.Annotations},
		Status: corev1.NodeStatus{Capacity: saved.Status.Capacity, Allocatable: saved.Status.Allocatable}}
	if _, err := suite.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("recreate node %s: %v", saved.Name, err)
	}
	// Its kubelet address and port too: metrics-server finds the node's fake kubelet by them, and
	// without them serves no usage of the node's Pods to the capacity tests and the HPA.
	status := mustJSON(t, map[string]any{"status": map[string]any{"capacity": saved.Status.Capacity, "allocatable": saved.Status.Allocatable,
		"addresses": saved.Status.Addresses, "daemonEndpoints": saved.Status.DaemonEndpoints}})
	waitNode(t, saved.Name, 2*time.Minute, "back, Ready and untainted, with its capacity and kubelet address", func(n *corev1.Node) bool {
		if !equality.Semantic.DeepEqual(n.Status.Capacity, saved.Status.Capacity) || !equality.Semantic.DeepEqual(n.Status.Allocatable, saved.Status.Allocatable) ||
			!equality.Semantic.DeepEqual(n.Status.Addresses, saved.Status.Addresses) || n.Status.DaemonEndpoints != saved.Status.DaemonEndpoints {
			// A failed patch is tried again at the next poll; the wait names the node as last seen.
			_, _ = suite.kube.CoreV1().Nodes().Patch(ctx, saved.Name, types.MergePatchType, status, metav1.PatchOptions{}, "status")
			return false
		}
		return contract.NodeHealthy(n)
	})
}

// timeline lists the versions of one Pod name seen: when, which Pod, revision, phase, readiness,
// deletion.
func timeline(evs []seen, name string) string {
	var b strings.Builder
	start := time.Time{}
	for _, e := range evs {
		p, ok := e.Obj.(*corev1.Pod)
		if !ok || p.Name != name {
			continue
		}
		if start.IsZero() {
			start = e.At
		}
		state := string(p.Status.Phase)
		if podReady(p) {
			state += ",ready"
		}
		if unschedulable(p) {
			state += ",unschedulable"
		}
		if p.DeletionTimestamp != nil {
			state += ",deleting"
		}
		fmt.Fprintf(&b, "\n\t+%5.2fs %-8s %s %s %s", e.At.Sub(start).Seconds(), e.Type, p.UID, p.Labels[appsv1.ControllerRevisionHashLabelKey], state)
	}
	return b.String()
}
