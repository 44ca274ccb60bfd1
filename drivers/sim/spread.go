package sim

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Topology spread and pod anti-affinity, the scheduler's filters that count other Pods.

// skew is the topology spread skew placing the Pod on the node would give, and false when the
// node is not in any domain of the constraint. Terminating Pods do not count (kubernetes#87621).
func (c *Cluster) skew(p *corev1.Pod, cand *corev1.Node, nodes []*corev1.Node, tsc corev1.TopologySpreadConstraint) (int, bool) {
	sel := spreadSelector(p, tsc)
	honorTaints := tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
	ignoreAffinity := tsc.NodeAffinityPolicy != nil && *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyIgnore
	counts := map[string]int{}
	for _, n := range nodes {
		v, ok := n.Labels[tsc.TopologyKey]
		if !ok || (!ignoreAffinity && !matchesNodeAffinity(p, n)) {
			continue
		}
		if honorTaints && untolerated(p, n) {
			continue
		}
		if _, seen := counts[v]; !seen {
			counts[v] = 0
		}
		for _, q := range c.pods() {
			if q.Spec.NodeName == n.Name && q.Namespace == p.Namespace && !terminating(q) && sel.Matches(labels.Set(q.Labels)) {
				counts[v]++
			}
		}
	}
	v, ok := cand.Labels[tsc.TopologyKey]
	if !ok {
		return 0, false
	}
	if _, in := counts[v]; !in {
		return 0, false
	}
	lowest := -1
	for _, k := range counts {
		if lowest < 0 || k < lowest {
			lowest = k
		}
	}
	if tsc.MinDomains != nil && len(counts) < int(*tsc.MinDomains) {
		lowest = 0
	}
	self := 0
	if sel.Matches(labels.Set(p.Labels)) {
		self = 1
	}
	return counts[v] + self - lowest, true
}

func untolerated(p *corev1.Pod, n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Effect != corev1.TaintEffectPreferNoSchedule && !toleratedBy(p.Spec.Tolerations, t) {
			return true
		}
	}
	return false
}

// spreadSelector is the constraint's selector plus its matchLabelKeys; a nil selector matches
// nothing, as in Kubernetes.
func spreadSelector(p *corev1.Pod, tsc corev1.TopologySpreadConstraint) labels.Selector {
	if tsc.LabelSelector == nil {
		return labels.Nothing()
	}
	ls := tsc.LabelSelector.DeepCopy()
	for _, k := range tsc.MatchLabelKeys {
		if v, ok := p.Labels[k]; ok {
			if ls.MatchLabels == nil {
				ls.MatchLabels = map[string]string{}
			}
			ls.MatchLabels[k] = v
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// antiAffinityConflict checks required pod anti-affinity terms (in the Pod's namespace).
func (c *Cluster) antiAffinityConflict(p *corev1.Pod, cand *corev1.Node, nodes []*corev1.Node) bool {
	a := p.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		return false
	}
	for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		v, ok := cand.Labels[term.TopologyKey]
		if !ok {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil || term.LabelSelector == nil {
			continue
		}
		for _, n := range nodes {
			if n.Labels[term.TopologyKey] != v {
				continue
			}
			for _, q := range c.pods() {
				if q.Spec.NodeName == n.Name && q.Namespace == p.Namespace && !terminating(q) && sel.Matches(labels.Set(q.Labels)) {
					return true
				}
			}
		}
	}
	return false
}
