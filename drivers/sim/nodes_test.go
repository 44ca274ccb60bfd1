package sim

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// fourNodes: n1 zone-a, n2 zone-b, n3 zone-c, n4 zone-a (the spare). Members land on n1, n2, n3.
func persistentFleetOnFourNodes(t *testing.T, opts Options) (*Cluster, *v1alpha1.CelldFleet) {
	t.Helper()
	c := newCluster(t, 4, opts)
	f := newFleet(t, c, "alpha", v1alpha1.ProfilePersistentFleet)
	apply(t, c, statefulSet(f, 3, "celld:v1"))
	runFor(c, 3*time.Minute)
	mustEqual(t, "ready", readyCount(memberPods(c, f)), 3)
	mustEqual(t, "alpha-0 node", c.Pod(ns, "alpha-0").Spec.NodeName, "n1")
	return c, f
}

func TestLostNodeLeavesItsPodTerminatingUntilForceDeleted(t *testing.T) {
	c, _ := persistentFleetOnFourNodes(t, Options{})
	must(t, c.LoseNode("n1"))
	c.Settle()
	p := c.Pod(ns, "alpha-0")
	mustEqual(t, "alpha-0 ready on a lost node", podReady(p), false)

	// A graceful delete is accepted but never completes: no kubelet finishes it.
	must(t, c.Do(machine.Action{Kind: machine.DeletePod, Key: "heal", Ref: kinds.Ref{Namespace: ns, Name: p.Name}, UID: p.UID, ResourceVersion: p.ResourceVersion}))
	runFor(c, time.Hour)
	p = c.Pod(ns, "alpha-0")
	if p == nil || !terminating(p) {
		t.Fatalf("alpha-0 after an hour: %v, want terminating", p)
	}
	// Its claim, asked to go, stays while the Pod mounts it.
	pvc := c.PVC(ns, "data-alpha-0")
	must(t, c.Do(machine.Action{Kind: machine.DeleteDisk, Key: "disk", Ref: kinds.Ref{Namespace: ns, Name: pvc.Name}, UID: pvc.UID}))
	runFor(c, time.Minute)
	if pvc := c.PVC(ns, "data-alpha-0"); pvc == nil || pvc.DeletionTimestamp == nil {
		t.Fatalf("claim mounted by a stuck Pod: %v, want terminating", pvc)
	}

	// Force: the Pod goes at once, then the claim, and the StatefulSet recreates the member.
	must(t, c.Do(machine.Action{Kind: machine.DeletePod, Key: "heal", Ref: kinds.Ref{Namespace: ns, Name: p.Name}, UID: p.UID, Force: true}))
	if c.Pod(ns, "alpha-0") != nil && c.Pod(ns, "alpha-0").UID == p.UID {
		t.Fatal("force delete left the Pod")
	}
	c.Settle()
	if got := c.PVC(ns, "data-alpha-0"); got != nil && got.UID == pvc.UID {
		t.Fatalf("claim still there after its Pod went: finalizers %v", got.Finalizers)
	}
	deletions := c.PodDeletions()
	mustEqual(t, "pod deletions", len(deletions), 2)
	mustEqual(t, "node state at deletion", deletions[1].NodeState, NodeGone)
	mustEqual(t, "forced", deletions[1].Force, true)
	mustEqual(t, "was terminating", deletions[1].WasTerminating, true)
	mustEqual(t, "other members not ready", deletions[1].OtherNotReady, 0)
	disks := c.DiskDeletions()
	mustEqual(t, "disk deletions", len(disks), 1)
	mustEqual(t, "members at disk deletion", disks[0].MemberPods, 3)
	mustEqual(t, "fleet deleting at disk deletion", disks[0].FleetDeleting, false)
}

func TestReplacementStaysPendingWhenItsDiskZoneHasNoRoom(t *testing.T) {
	c, _ := persistentFleetOnFourNodes(t, Options{})
	// alpha-1 is on n2, the only node of zone-b: its zonal disk cannot follow it elsewhere.
	mustEqual(t, "alpha-1 node", c.Pod(ns, "alpha-1").Spec.NodeName, "n2")
	must(t, c.LoseNode("n2"))
	p := c.Pod(ns, "alpha-1")
	must(t, c.Do(machine.Action{Kind: machine.DeletePod, Key: "heal", Ref: kinds.Ref{Namespace: ns, Name: p.Name}, UID: p.UID, Force: true}))
	runFor(c, 5*time.Minute)
	p = c.Pod(ns, "alpha-1")
	if p == nil || p.Spec.NodeName != "" {
		t.Fatalf("replacement %v, want Pending", p)
	}
	cond := p.Status.Conditions[0]
	mustEqual(t, "reason", cond.Reason, "Unschedulable")
	if want := "volume node affinity conflict"; !strings.Contains(cond.Message, want) {
		t.Fatalf("message %q, want it to say %q", cond.Message, want)
	}

	// A new node in zone-b takes it.
	must(t, c.AddNode("n5", "zone-b"))
	runFor(c, time.Minute)
	mustEqual(t, "replacement node", c.Pod(ns, "alpha-1").Spec.NodeName, "n5")
	mustEqual(t, "replacement ready", podReady(c.Pod(ns, "alpha-1")), true)
}

func TestUnreachableNodeMembersRecoverWhenItComesBack(t *testing.T) {
	c, f := persistentFleetOnFourNodes(t, Options{})
	must(t, c.SetNodeUnreachable("n3"))
	c.Settle()
	mustEqual(t, "node state", c.NodeState("n3"), NodeUnreachable)
	mustEqual(t, "alpha-2 ready", podReady(c.Pod(ns, "alpha-2")), false)
	runFor(c, 10*time.Minute)
	// Without taint eviction nothing deletes it; the StatefulSet does not replace it.
	mustEqual(t, "alpha-2 uid kept", c.Pod(ns, "alpha-2").DeletionTimestamp == nil, true)

	must(t, c.SetNodeReady("n3"))
	c.Settle()
	mustEqual(t, "alpha-2 ready at once", podReady(c.Pod(ns, "alpha-2")), false)
	runFor(c, 30*time.Second)
	mustEqual(t, "ready after recovery", readyCount(memberPods(c, f)), 3)
}

func TestTaintEvictionAndOrphanCollectionWhenEnabled(t *testing.T) {
	c, _ := persistentFleetOnFourNodes(t, Options{EvictAfter: 300 * time.Second, OrphanPodGCAfter: 40 * time.Second})
	must(t, c.SetNodeUnreachable("n3"))
	runFor(c, 295*time.Second)
	mustEqual(t, "alpha-2 evicted before 300s", terminating(c.Pod(ns, "alpha-2")), false)
	runFor(c, 10*time.Second)
	mustEqual(t, "alpha-2 evicted after 300s", terminating(c.Pod(ns, "alpha-2")), true)
	runFor(c, 10*time.Minute)
	mustEqual(t, "evicted Pod still terminating on an unreachable node", terminating(c.Pod(ns, "alpha-2")), true)

	uid := c.Pod(ns, "alpha-0").UID
	must(t, c.LoseNode("n1"))
	runFor(c, 35*time.Second)
	mustEqual(t, "orphan before quarantine", c.Pod(ns, "alpha-0").UID, uid)
	runFor(c, 10*time.Second)
	if p := c.Pod(ns, "alpha-0"); p != nil && p.UID == uid {
		t.Fatal("orphaned Pod survived the quarantine")
	}
	if len(c.PodDeletions()) != 0 {
		t.Fatalf("controller deletions recorded as the operator's: %v", c.PodDeletions())
	}
}

// TestUnreachableNodeStillCountsAsASpreadDomain: with the default nodeTaintsPolicy (Ignore) a
// tainted node is a topology domain, so once its member is gone it holds the minimum at 0 and
// a replacement may not double up elsewhere under maxSkew 1: it waits for the node.
func TestUnreachableNodeStillCountsAsASpreadDomain(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	apply(t, c, statefulSet(f, 3, "celld:v1"))
	runFor(c, 3*time.Minute)
	must(t, c.SetNodeUnreachable("n3"))
	p := c.Pod(ns, "alpha-2")
	must(t, c.Do(machine.Action{Kind: machine.DeletePod, Key: "heal", Ref: kinds.Ref{Namespace: ns, Name: p.Name}, UID: p.UID, Force: true}))
	runFor(c, 5*time.Minute)
	p = c.Pod(ns, "alpha-2")
	if p == nil || p.Spec.NodeName != "" {
		t.Fatalf("replacement %v, want Pending", p)
	}
	if msg := p.Status.Conditions[0].Message; !strings.Contains(msg, "topology spread") || !strings.Contains(msg, "untolerated taint") {
		t.Fatalf("message %q, want spread and taint reasons", msg)
	}
	must(t, c.SetNodeReady("n3"))
	runFor(c, time.Minute)
	mustEqual(t, "replacement node", c.Pod(ns, "alpha-2").Spec.NodeName, "n3")

	// Honor makes the tainted node no domain: the replacement doubles up at once.
	c2 := newCluster(t, 3, Options{})
	f2 := newFleet(t, c2, "alpha", v1alpha1.ProfileBucket)
	s := statefulSet(f2, 3, "celld:v1")
	honor := corev1.NodeInclusionPolicyHonor
	s.Spec.Template.Spec.TopologySpreadConstraints[0].NodeTaintsPolicy = &honor
	apply(t, c2, s)
	runFor(c2, 3*time.Minute)
	must(t, c2.SetNodeUnreachable("n3"))
	p = c2.Pod(ns, "alpha-2")
	must(t, c2.Do(machine.Action{Kind: machine.DeletePod, Key: "heal", Ref: kinds.Ref{Namespace: ns, Name: p.Name}, UID: p.UID, Force: true}))
	runFor(c2, time.Minute)
	if n := c2.Pod(ns, "alpha-2").Spec.NodeName; n == "" || n == "n3" {
		t.Fatalf("with Honor the replacement went to %q, want a healthy node", n)
	}
}
