package realnodes

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestBucketFleetOnRealNodes runs a Bucket fleet (a Deployment, data in its bucket, scratch on an
// emptyDir) through its life on real nodes: created, grown, shrunk one member per step, upgraded
// by the Deployment's rolling update, and deleted.
func TestBucketFleetOnRealNodes(t *testing.T) {
	f := newFixture(t)
	fl := f.create(f.newFleet("bf", v1alpha1.ProfileBucket, 3))
	fl = f.waitConverged(fl.Name)
	f.checkMembersRun(fl, "v1")

	deploys := f.recordDeployments()

	t.Log("grow 3 -> 4")
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Members = 4 })
	fl = f.waitConverged(fl.Name)
	f.checkMembersRun(fl, "v1")

	t.Log("shrink 4 -> 2")
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Members = 2 })
	fl = f.waitConverged(fl.Name)
	f.checkMembersRun(fl, "v1")
	checkShrink(t, "Deployment", deploys.Events(t), 4, 2)

	t.Log("rolling upgrade to v2")
	fl = f.upgrade(fl)

	t.Log("delete the fleet")
	f.deleteFleet(fl.Name)
	if procs := processes(fl.UID); len(procs) != 0 {
		t.Errorf("celld processes of the deleted fleet still run: %v", keys(procs))
	}
	f.verify()
}

// nodeNumber is N of real-node-N.
func nodeNumber(t *testing.T, node string) string {
	t.Helper()
	n, ok := strings.CutPrefix(node, "real-node-")
	if !ok || n == "" {
		t.Fatalf("member on node %q, not one of the real nodes", node)
	}
	return n
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestNodeLostAndFenced: a real node powered off (its kubelet, runtime and containers killed at
// once), then fenced with the out-of-service taint, gets its member replaced on another node: one
// member, under its own name, and no second copy of it ever runs. The fleet is a Bucket fleet on
// an ordered StatefulSet: its members keep their names, and its data is in the bucket, so the
// member can start elsewhere (a PersistentFleet's local disk cannot follow it; docs/real-nodes.md).
func TestNodeLostAndFenced(t *testing.T) {
	f := newFixture(t)
	spec := f.newFleet("nl", v1alpha1.ProfileBucket, 3)
	spec.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	fl := f.waitConverged(f.create(spec).Name)
	f.checkMembersRun(fl, "v1")
	before := map[string]corev1.Pod{}
	for _, p := range f.members(fl) {
		before[p.Name] = p
	}
	victim := before["nl-1"]
	node := victim.Spec.NodeName
	n := nodeNumber(t, node)
	copies := watchCopies(fl.UID, 100*time.Millisecond)

	t.Logf("power off %s, which runs %s", node, victim.Name)
	if _, err := suite.cp.Script("real.sh", "stop-node", n); err != nil {
		t.Fatalf("stop %s: %v", node, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = kubectl(ctx, "taint", "node", node, "node.kubernetes.io/out-of-service-")
		if _, err := suite.cp.Script("real.sh", "start-node", n); err != nil {
			t.Errorf("start %s again: %v", node, err)
		}
		if _, err := kubectl(ctx, "wait", "--for=condition=Ready", "node/"+node, "--timeout=120s"); err != nil {
			t.Errorf("%s not Ready again: %v", node, err)
		}
	})
	if ps := processes(fl.UID)[victim.Name]; len(ps) != 0 {
		t.Fatalf("member %s still runs on the powered-off node (pid %d)", victim.Name, ps[0].pid)
	}
	waitFor(t, f.ctx, node+" NotReady", 2*time.Minute, func() bool {
		nd, err := suite.kube.CoreV1().Nodes().Get(f.ctx, node, metav1.GetOptions{})
		return err == nil && !nodeReady(nd)
	})
	// The operator waits for a fence: a node that stops answering may be cut off but alive.
	time.Sleep(5 * time.Second)
	if p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, victim.Name, metav1.GetOptions{}); err != nil || p.UID != victim.UID {
		t.Fatalf("member %s was replaced before its node was fenced (%v)", victim.Name, err)
	}

	t.Logf("fence %s (out-of-service)", node)
	if _, err := kubectl(f.ctx, "taint", "node", node, "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, f.ctx, "member "+victim.Name+" back on another node", converge, func() bool {
		p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, victim.Name, metav1.GetOptions{})
		return err == nil && p.UID != victim.UID && podReady(p) && p.Spec.NodeName != node
	})
	fl = f.waitConverged(fl.Name)
	most := copies.end()
	for name, c := range most {
		if c > 1 {
			t.Errorf("member %s ran as %d processes at once", name, c)
		}
	}
	replaced := 0
	for _, p := range f.members(fl) {
		if b, ok := before[p.Name]; ok && b.UID != p.UID {
			replaced++
			if p.Name != victim.Name {
				t.Errorf("member %s was replaced too; only %s's node was lost", p.Name, victim.Name)
			}
		}
	}
	if replaced != 1 {
		t.Errorf("%d members replaced, want 1 (%s)", replaced, victim.Name)
	}
	f.checkMembersRun(fl, "v1")
	f.verify()
}
