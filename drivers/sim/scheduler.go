package sim

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/celld/celld-operator/kinds"
)

// The scheduler binds each Pending Pod to the best feasible node, one Pod at a time in creation
// order, or leaves it Pending with an Unschedulable condition. Filters: taints (a NotReady or
// unreachable node carries NoSchedule taints), nodeSelector, required node affinity, required
// pod anti-affinity, DoNotSchedule topology spread with Kubernetes' default policies (node
// affinity honoured, taints ignored: an unreachable node still counts as a domain), volume
// zones and unbound claims. Scores: ScheduleAnyway spread skew, then fewest Pods, then name.

func (c *Cluster) schedule() bool {
	pending := []*corev1.Pod{}
	for _, p := range c.pods() {
		if p.Spec.NodeName == "" && !terminating(p) {
			pending = append(pending, p)
		}
	}
	// UIDs come from a counter, so they sort in creation order.
	sort.Slice(pending, func(i, j int) bool { return pending[i].UID < pending[j].UID })
	changed := false
	for _, p := range pending {
		node, why := c.pickNode(p)
		next := p.DeepCopy()
		if node == nil {
			setScheduled(next, false, "Unschedulable", why, c.now)
		} else {
			for _, pvc := range c.podClaims(p) {
				if pvc.Status.Phase == corev1.ClaimPending {
					c.bindClaim(pvc, node.Labels[corev1.LabelTopologyZone])
				}
			}
			next.Spec.NodeName = node.Name
			setScheduled(next, true, "", "", c.now)
		}
		if c.put(next) {
			changed = true
		}
	}
	return changed
}

func setScheduled(p *corev1.Pod, ok bool, reason, msg string, now time.Time) {
	setPodCondition(p, corev1.PodScheduled, ok, now)
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			p.Status.Conditions[i].Reason = reason
			p.Status.Conditions[i].Message = msg
		}
	}
}

func (c *Cluster) podClaims(p *corev1.Pod) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			if pvc := c.claim(p.Namespace, v.PersistentVolumeClaim.ClaimName); pvc != nil {
				out = append(out, pvc)
			}
		}
	}
	return out
}

// claimsReady says why the Pod's claims keep it off every node, and which zone they hold it to.
func (c *Cluster) claimsReady(p *corev1.Pod) (zone, why string) {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		name := v.PersistentVolumeClaim.ClaimName
		pvc := c.claim(p.Namespace, name)
		switch {
		case pvc == nil:
			return "", fmt.Sprintf("persistentvolumeclaim %q not found", name)
		case pvc.DeletionTimestamp != nil:
			return "", fmt.Sprintf("persistentvolumeclaim %q is being deleted", name)
		case pvc.Status.Phase == corev1.ClaimLost:
			return "", fmt.Sprintf("persistentvolumeclaim %q bound to non-existent persistentvolume", name)
		case pvc.Status.Phase == corev1.ClaimBound:
			if z := c.claimZone[pvc.UID]; z != "" {
				zone = z
			}
		default:
			if sc, ok := c.claimClass(pvc); !ok || !waitsForConsumer(sc) {
				return "", "pod has unbound immediate PersistentVolumeClaims"
			}
		}
	}
	return zone, ""
}

func (c *Cluster) pickNode(p *corev1.Pod) (*corev1.Node, string) {
	nodes := make([]*corev1.Node, 0, len(c.objs[KindNode]))
	for _, o := range c.list(KindNode) {
		nodes = append(nodes, o.(*corev1.Node))
	}
	zone, why := c.claimsReady(p)
	if why != "" {
		return nil, fmt.Sprintf("0/%d nodes are available: %s.", len(nodes), why)
	}
	reasons := map[string]int{}
	var feasible []*corev1.Node
	for _, n := range nodes {
		if r := c.filter(p, n, nodes, zone); r != "" {
			reasons[r]++
			continue
		}
		feasible = append(feasible, n)
	}
	if len(feasible) == 0 {
		parts := make([]string, 0, len(reasons))
		for r, k := range reasons {
			parts = append(parts, fmt.Sprintf("%d %s", k, r))
		}
		sort.Strings(parts)
		return nil, fmt.Sprintf("0/%d nodes are available: %s.", len(nodes), strings.Join(parts, ", "))
	}
	best, bestSkew, bestPods := feasible[0], -1, 0
	for _, n := range feasible {
		skew := 0
		for _, tsc := range p.Spec.TopologySpreadConstraints {
			if tsc.WhenUnsatisfiable == corev1.ScheduleAnyway {
				s, _ := c.skew(p, n, nodes, tsc)
				skew += s
			}
		}
		pods := c.podsOn(n.Name)
		if bestSkew < 0 || skew < bestSkew || (skew == bestSkew && pods < bestPods) {
			best, bestSkew, bestPods = n, skew, pods
		}
	}
	return best, ""
}

// filter returns why the Pod cannot go to the node, empty when it can.
func (c *Cluster) filter(p *corev1.Pod, n *corev1.Node, nodes []*corev1.Node, zone string) string {
	if n.Spec.Unschedulable {
		return "node(s) were unschedulable"
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !toleratedBy(p.Spec.Tolerations, t) {
			return fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value)
		}
	}
	if !matchesNodeAffinity(p, n) {
		return "node(s) didn't match Pod's node affinity/selector"
	}
	if zone != "" && n.Labels[corev1.LabelTopologyZone] != zone {
		return "node(s) had volume node affinity conflict"
	}
	if c.antiAffinityConflict(p, n, nodes) {
		return "node(s) didn't match pod anti-affinity rules"
	}
	for _, tsc := range p.Spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable == corev1.ScheduleAnyway {
			continue
		}
		if skew, ok := c.skew(p, n, nodes, tsc); !ok || skew > int(tsc.MaxSkew) {
			return "node(s) didn't match pod topology spread constraints"
		}
	}
	if c.opts.OnePerNode {
		uid := p.Labels[kinds.LabelFleetUID]
		for _, q := range c.pods() {
			if uid != "" && q.Spec.NodeName == n.Name && !terminating(q) && q.Labels[kinds.LabelFleetUID] == uid {
				return "node(s) already run a member of the fleet"
			}
		}
	}
	return ""
}

func toleratedBy(tols []corev1.Toleration, t corev1.Taint) bool {
	for _, tol := range tols {
		if tolerates(tol, t) {
			return true
		}
	}
	return false
}

func matchesNodeAffinity(p *corev1.Pod, n *corev1.Node) bool {
	for k, v := range p.Spec.NodeSelector {
		if n.Labels[k] != v {
			return false
		}
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if matchesTerm(term, n.Labels) {
			return true
		}
	}
	return false
}

func matchesTerm(term corev1.NodeSelectorTerm, l map[string]string) bool {
	if len(term.MatchExpressions) == 0 {
		return false
	}
	for _, e := range term.MatchExpressions {
		v, has := l[e.Key]
		ok := false
		switch e.Operator {
		case corev1.NodeSelectorOpIn:
			ok = has && contains(e.Values, v)
		case corev1.NodeSelectorOpNotIn:
			ok = !has || !contains(e.Values, v)
		case corev1.NodeSelectorOpExists:
			ok = has
		case corev1.NodeSelectorOpDoesNotExist:
			ok = !has
		}
		if !ok {
			return false
		}
	}
	return true
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// podsOn counts the live Pods bound to a node.
func (c *Cluster) podsOn(node string) int {
	n := 0
	for _, q := range c.pods() {
		if q.Spec.NodeName == node && !terminating(q) {
			n++
		}
	}
	return n
}
