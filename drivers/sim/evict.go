package sim

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/celld/celld-operator/events"
)

// Cordon marks a node unschedulable, or schedulable again, as kubectl cordon and uncordon do:
// the first step of a drain, and the last of a node's maintenance.
func (c *Cluster) Cordon(name string, on bool) error {
	n := c.node(name)
	if n == nil {
		return fmt.Errorf("cordon node %s: %w", name, apierrors.NewNotFound(row(KindNode).Resource, name))
	}
	if n.Spec.Unschedulable == on {
		return nil
	}
	next := n.DeepCopy()
	next.Spec.Unschedulable = on
	c.put(next)
	return nil
}

// Evict asks for a Pod's eviction as the Eviction API does (pkg/registry/core/pod/storage/
// eviction.go), and reports whether it was allowed. A Pod already leaving, or not yet running,
// goes without asking any budget. Otherwise the disruption budget that selects it decides, on
// the state of this moment (the disruption controller's status, never stale here): a Ready Pod
// goes only while more members are healthy than the budget requires; a Pod that is not Ready
// goes while the healthy ones reach what it requires (IfHealthyBudget), or always
// (AlwaysAllow). Allowed, the Pod gets the DisruptionTarget condition the API server sets, and
// a graceful deletion.
func (c *Cluster) Evict(namespace, name string) (bool, error) {
	p := c.pod(namespace, name)
	if p == nil {
		return false, fmt.Errorf("evict pod %s/%s: %w", namespace, name, apierrors.NewNotFound(row(KindPod).Resource, name))
	}
	if terminating(p) {
		return true, nil
	}
	if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodPending {
		if pdb := c.budgetOf(p); pdb != nil && !c.budgetAllows(pdb, p) {
			return false, nil
		}
	}
	next := p.DeepCopy()
	setPodCondition(next, corev1.DisruptionTarget, true, c.now)
	for i := range next.Status.Conditions {
		if cond := &next.Status.Conditions[i]; cond.Type == corev1.DisruptionTarget {
			cond.Reason, cond.Message = events.DisruptionEviction, "Eviction API: evicting"
		}
	}
	c.put(next)
	c.deletePod(c.pod(namespace, name), nil)
	return true, nil
}

// budgetOf is the disruption budget of the Pod's namespace whose selector matches it.
func (c *Cluster) budgetOf(p *corev1.Pod) *policyv1.PodDisruptionBudget {
	for _, o := range c.list(KindPDB) {
		pdb := o.(*policyv1.PodDisruptionBudget)
		if pdb.Namespace != p.Namespace || pdb.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(p.Labels)) {
			return pdb
		}
	}
	return nil
}

// budgetAllows is the disruption controller's arithmetic and the Eviction API's test: expected
// is the scale of the controllers of the Pods the budget selects, healthy the Ready ones not
// leaving, desired what maxUnavailable leaves of expected.
func (c *Cluster) budgetAllows(pdb *policyv1.PodDisruptionBudget, p *corev1.Pod) bool {
	sel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	expected, healthy := 0, 0
	scales := map[string]int{}
	for _, q := range c.pods() {
		if q.Namespace != pdb.Namespace || !sel.Matches(labels.Set(q.Labels)) {
			continue
		}
		if podReady(q) && !terminating(q) {
			healthy++
		}
		if ref := metav1.GetControllerOfNoCopy(q); ref != nil {
			if owner, ok := c.byUID[ref.UID]; ok {
				scales[string(ref.UID)] = replicasOf(owner)
			}
		}
	}
	for _, n := range scales {
		expected += n
	}
	desired := expected
	if mu := pdb.Spec.MaxUnavailable; mu != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(mu, expected, true)
		if err != nil {
			return false
		}
		desired = max(0, expected-n)
	} else if mn := pdb.Spec.MinAvailable; mn != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(mn, expected, true)
		if err != nil {
			return false
		}
		desired = n
	}
	if podReady(p) {
		return healthy-desired > 0
	}
	if pol := pdb.Spec.UnhealthyPodEvictionPolicy; pol != nil && *pol == policyv1.AlwaysAllow {
		return true
	}
	return healthy >= desired
}

// replicasOf is a workload's spec.replicas, 0 for any other owner.
func replicasOf(o object) int {
	switch w := o.(type) {
	case *appsv1.StatefulSet:
		return specReplicas(w.Spec.Replicas)
	case *appsv1.Deployment:
		return specReplicas(w.Spec.Replicas)
	}
	return 0
}
