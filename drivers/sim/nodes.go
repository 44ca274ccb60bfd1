package sim

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeState is a node's health as the node lifecycle controller reports it.
type NodeState string

const (
	NodeReady NodeState = "Ready"
	// NodeNotReady: the kubelet reports Ready=False.
	NodeNotReady NodeState = "NotReady"
	// NodeUnreachable: no kubelet heartbeats; Ready=Unknown and the unreachable taints.
	NodeUnreachable NodeState = "Unreachable"
	// NodeGone: the Node object does not exist.
	NodeGone NodeState = "Gone"
	// NodeNone: the Pod is not bound to a node.
	NodeNone NodeState = ""
)

func (c *Cluster) nodeState(name string) NodeState {
	if name == "" {
		return NodeNone
	}
	n := c.node(name)
	if n == nil {
		return NodeGone
	}
	switch nodeReadyStatus(n) {
	case corev1.ConditionTrue:
		return NodeReady
	case corev1.ConditionFalse:
		return NodeNotReady
	}
	return NodeUnreachable
}

func nodeReadyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status
		}
	}
	return corev1.ConditionUnknown
}

// nodeUnhealthySince is when the node's Ready condition last changed, zero when the node is gone.
func (c *Cluster) nodeUnhealthySince(name string) time.Time {
	if n := c.node(name); n != nil {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.LastTransitionTime.Time
			}
		}
	}
	return c.nodeGone[name]
}

// AddNode creates a Ready node in a zone, labelled as cloud nodes are.
func (c *Cluster) AddNode(name, zone string) error {
	n := &corev1.Node{}
	n.Name = name
	n.Labels = map[string]string{
		corev1.LabelHostname:          name,
		corev1.LabelTopologyZone:      zone,
		corev1.LabelOSStable:          "linux",
		"kubernetes.io/arch":          "amd64",
		corev1.LabelTopologyRegion:    "region-1",
		"node.kubernetes.io/instance": "sim",
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "KubeletReady", LastTransitionTime: metav1.NewTime(c.now), LastHeartbeatTime: metav1.NewTime(c.now)}}
	if err := c.create(n); err != nil {
		return fmt.Errorf("add node %s: %w", name, err)
	}
	delete(c.nodeGone, name)
	return nil
}

// LoseNode deletes a node, as a cloud controller does when its machine is gone. Its Pods stay,
// bound to a node that no longer exists, until someone force-deletes them (or the orphan Pod
// collector, when Options.OrphanPodGCAfter is set).
func (c *Cluster) LoseNode(name string) error {
	n := c.node(name)
	if n == nil {
		return fmt.Errorf("lose node %s: %w", name, apierrors.NewNotFound(row(KindNode).Resource, name))
	}
	c.remove(n)
	c.nodeGone[name] = c.now
	c.killZombies(name)
	return nil
}

// SetNodeUnreachable stops a node's heartbeats: Ready becomes Unknown and the node gets the
// unreachable taints, as the node lifecycle controller does after its grace period.
func (c *Cluster) SetNodeUnreachable(name string) error {
	return c.setNodeHealth(name, corev1.ConditionUnknown, corev1.TaintNodeUnreachable, "NodeStatusUnknown")
}

// FenceNode taints a node out-of-service, as an administrator does once its machine is powered
// off (non-graceful node shutdown): from then on nothing runs there, and Kubernetes removes the
// node's terminating Pods without waiting for its kubelet.
func (c *Cluster) FenceNode(name string) error {
	n := c.node(name)
	if n == nil {
		return fmt.Errorf("fence node %s: %w", name, apierrors.NewNotFound(row(KindNode).Resource, name))
	}
	next := n.DeepCopy()
	for _, t := range next.Spec.Taints {
		if t.Key == corev1.TaintNodeOutOfService {
			return nil
		}
	}
	added := metav1.NewTime(c.now)
	next.Spec.Taints = append(next.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown",
		Effect: corev1.TaintEffectNoExecute, TimeAdded: &added})
	c.put(next)
	return nil
}

// SetNodeNotReady makes a node's kubelet report Ready=False.
func (c *Cluster) SetNodeNotReady(name string) error {
	return c.setNodeHealth(name, corev1.ConditionFalse, corev1.TaintNodeNotReady, "KubeletNotReady")
}

// SetNodeReady brings a node back, repaired and back in service (no out-of-service taint); its
// members recover after the recovery delay.
func (c *Cluster) SetNodeReady(name string) error {
	if err := c.setNodeHealth(name, corev1.ConditionTrue, "", "KubeletReady"); err != nil {
		return err
	}
	next := c.node(name).DeepCopy()
	taints := next.Spec.Taints[:0]
	for _, t := range next.Spec.Taints {
		if t.Key != corev1.TaintNodeOutOfService {
			taints = append(taints, t)
		}
	}
	if len(taints) != len(next.Spec.Taints) {
		next.Spec.Taints = taints
		c.put(next)
	}
	return nil
}

func (c *Cluster) setNodeHealth(name string, status corev1.ConditionStatus, taint, reason string) error {
	n := c.node(name)
	if n == nil {
		return fmt.Errorf("set node %s %s: %w", name, status, apierrors.NewNotFound(row(KindNode).Resource, name))
	}
	next := n.DeepCopy()
	for i := range next.Status.Conditions {
		cond := &next.Status.Conditions[i]
		if cond.Type == corev1.NodeReady && cond.Status != status {
			cond.Status = status
			cond.Reason = reason
			cond.LastTransitionTime = metav1.NewTime(c.now)
		}
	}
	var taints []corev1.Taint
	for _, t := range next.Spec.Taints {
		if t.Key != corev1.TaintNodeUnreachable && t.Key != corev1.TaintNodeNotReady {
			taints = append(taints, t)
		}
	}
	if taint != "" {
		added := metav1.NewTime(c.now)
		for _, t := range n.Spec.Taints {
			if t.Key == taint && t.Effect == corev1.TaintEffectNoExecute && t.TimeAdded != nil {
				added = *t.TimeAdded
			}
		}
		taints = append(taints, corev1.Taint{Key: taint, Effect: corev1.TaintEffectNoSchedule},
			corev1.Taint{Key: taint, Effect: corev1.TaintEffectNoExecute, TimeAdded: &added})
	}
	next.Spec.Taints = taints
	c.put(next)
	return nil
}

// evictFromUnhealthyNodes is the taint manager: a Pod that does not tolerate a node's NoExecute
// taint long enough gets a deletion request, which its unreachable kubelet never completes.
func (c *Cluster) evictFromUnhealthyNodes() bool {
	if c.opts.EvictAfter <= 0 {
		return false
	}
	changed := false
	for _, p := range c.pods() {
		n := c.node(p.Spec.NodeName)
		if n == nil || terminating(p) {
			continue
		}
		for _, t := range n.Spec.Taints {
			if t.Effect != corev1.TaintEffectNoExecute || t.TimeAdded == nil {
				continue
			}
			limit, evict := c.opts.EvictAfter, true
			for _, tol := range p.Spec.Tolerations {
				if tolerates(tol, t) {
					if tol.TolerationSeconds == nil {
						evict = false
					} else {
						limit = time.Duration(*tol.TolerationSeconds) * time.Second
					}
				}
			}
			if evict && !c.now.Before(t.TimeAdded.Add(limit)) {
				if c.deletePod(p, nil) {
					changed = true
				}
				break
			}
		}
	}
	return changed
}

// collectOrphanPods is the Pod garbage collector's gcOrphaned: a Pod bound to a node that has
// been gone for the quarantine period is force-deleted.
func (c *Cluster) collectOrphanPods() bool {
	if c.opts.OrphanPodGCAfter <= 0 {
		return false
	}
	changed := false
	for _, p := range c.pods() {
		gone, ok := c.nodeGone[p.Spec.NodeName]
		if ok && c.node(p.Spec.NodeName) == nil && !c.now.Before(gone.Add(c.opts.OrphanPodGCAfter)) {
			c.remove(p)
			changed = true
		}
	}
	return changed
}

// nodeFenced reports whether a node exists and carries the out-of-service taint.
func (c *Cluster) nodeFenced(name string) bool {
	n := c.node(name)
	if n == nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeOutOfService {
			return true
		}
	}
	return false
}

// collectOutOfServicePods is the Pod garbage collector's gcTerminating: a terminating Pod on a
// NotReady node tainted out-of-service is force-deleted, its kubelet never will. The taint
// manager's eviction (evictFromUnhealthyNodes) makes the node's other Pods terminating first.
func (c *Cluster) collectOutOfServicePods() bool {
	changed := false
	for _, p := range c.pods() {
		if !terminating(p) || !c.nodeFenced(p.Spec.NodeName) || c.nodeState(p.Spec.NodeName) == NodeReady {
			continue
		}
		c.remove(p)
		changed = true
	}
	return changed
}

// tolerates is corev1.Toleration.ToleratesTaint without the comparison operators, which would
// need a logger for nothing here.
func tolerates(tol corev1.Toleration, t corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case corev1.TolerationOpExists:
		return true
	case "", corev1.TolerationOpEqual:
		return tol.Key != "" && tol.Value == t.Value
	}
	return false
}
