package sim

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Zombie is a member process that still runs on a partitioned node although its Pod object is
// gone from the API: the node is NotReady or unreachable, not gone and not fenced, so nobody
// stopped it. It runs (and could write) until its node is deleted, fenced, or back, when the
// kubelet learns its Pod is gone and kills it.
type Zombie struct {
	Namespace, Name string
	UID             types.UID
	FleetUID        types.UID
	Node            string
	Since           time.Time
}

// Zombies lists the member processes running without a Pod object, oldest first.
func (c *Cluster) Zombies() []Zombie {
	out := append([]Zombie(nil), c.zombies...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}

// Fenced reports whether a node exists and carries the out-of-service taint.
func (c *Cluster) Fenced(name string) bool { return c.nodeFenced(name) }

// UnfenceNode removes the out-of-service taint, as a person does once the node is repaired.
func (c *Cluster) UnfenceNode(name string) error {
	n := c.node(name)
	if n == nil || !c.nodeFenced(name) {
		return nil
	}
	next := n.DeepCopy()
	var taints []corev1.Taint
	for _, t := range next.Spec.Taints {
		if t.Key != corev1.TaintNodeOutOfService {
			taints = append(taints, t)
		}
	}
	next.Spec.Taints = taints
	c.put(next)
	return nil
}

// noteRemovedPod keeps the process of a Pod removed from the API while its node is partitioned:
// nothing stopped it.
func (c *Cluster) noteRemovedPod(p *corev1.Pod) {
	node := p.Spec.NodeName
	if node == "" || c.node(node) == nil || c.nodeState(node) == NodeReady || c.nodeFenced(node) {
		return
	}
	if p.Status.Phase != corev1.PodRunning {
		return
	}
	c.zombies = append(c.zombies, Zombie{Namespace: p.Namespace, Name: p.Name, UID: p.UID,
		FleetUID: types.UID(p.Labels["celld.io/fleet-uid"]), Node: node, Since: c.now})
}

// killZombies stops the processes on a node that is gone, fenced, or back (its kubelet kills
// what the API no longer has).
func (c *Cluster) killZombies(node string) {
	var keep []Zombie
	for _, z := range c.zombies {
		if z.Node != node {
			keep = append(keep, z)
		}
	}
	c.zombies = keep
}

// reapZombies kills the zombies whose node is no longer partitioned.
func (c *Cluster) reapZombies() bool {
	for _, z := range c.zombies {
		if s := c.nodeState(z.Node); s == NodeReady || s == NodeGone || c.nodeFenced(z.Node) {
			c.killZombies(z.Node)
			return true
		}
	}
	return false
}

// RunningCopies lists, per member identity (namespace/name), the places a member process of that
// identity runs: the Pod's node when its Pod is Running and not removed, and every zombie's node.
// More than one entry is two copies of one member.
func (c *Cluster) RunningCopies() map[string][]string {
	out := map[string][]string{}
	for _, z := range c.zombies {
		k := key(z.Namespace, z.Name)
		out[k] = append(out[k], z.Node+" (partitioned, pod removed)")
	}
	for _, p := range c.pods() {
		k := key(p.Namespace, p.Name)
		if _, ok := out[k]; !ok {
			continue
		}
		if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
			out[k] = append(out[k], p.Spec.NodeName)
		}
	}
	return out
}

// claimLost reports whether a Pod's data claim is missing, lost or being deleted.
func (c *Cluster) claimLost(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc := c.claim(p.Namespace, v.PersistentVolumeClaim.ClaimName)
		if pvc == nil || pvc.DeletionTimestamp != nil || pvc.Status.Phase == corev1.ClaimLost {
			return true
		}
	}
	return false
}

// revisionBehind reports whether a StatefulSet member runs a revision other than its set's
// update revision.
func (c *Cluster) revisionBehind(p *corev1.Pod) bool {
	rev := p.Labels[appsv1.StatefulSetRevisionLabel]
	if rev == "" {
		return false
	}
	for _, ref := range p.OwnerReferences {
		if ref.Kind != "StatefulSet" {
			continue
		}
		if s, ok := c.get(KindStatefulSet, p.Namespace, ref.Name).(*appsv1.StatefulSet); ok {
			return s.Status.UpdateRevision != "" && s.Status.UpdateRevision != rev
		}
	}
	return false
}
