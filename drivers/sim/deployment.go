package sim

import (
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The Deployment controller with the ReplicaSet controller folded in: the Deployment owns its
// Pods directly, labelled pod-template-hash. A rolling update follows the real planner
// (reconcileNewReplicaSet, reconcileOldReplicaSets with cleanupUnhealthyReplicas) with
// maxSurge and maxUnavailable; scale-down removes the least useful Pods first, ranked as the
// ReplicaSet controller ranks them. Simplified: no ReplicaSet objects, no proportional scaling,
// no progress deadline, no minReadySeconds.

func (c *Cluster) syncDeployments() bool {
	changed := false
	for _, o := range c.list(KindDeployment) {
		if c.syncDeployment(o.(*appsv1.Deployment)) {
			changed = true
		}
	}
	return changed
}

func (c *Cluster) deploymentPods(d *appsv1.Deployment) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range c.pods() {
		if p.Namespace == d.Namespace && controlledBy(p, d) {
			out = append(out, p)
		}
	}
	return out
}

func (c *Cluster) syncDeployment(d *appsv1.Deployment) bool {
	hash := templateHash(&d.Spec.Template)
	changed := false
	if d.DeletionTimestamp == nil && !d.Spec.Paused {
		changed = c.stepDeployment(d, hash)
	}
	return c.updateDeploymentStatus(d, hash) || changed
}

func (c *Cluster) stepDeployment(d *appsv1.Deployment, hash string) bool {
	want := specReplicas(d.Spec.Replicas)
	var newPods, oldPods []*corev1.Pod
	oldTerminating := false
	for _, p := range c.deploymentPods(d) {
		isNew := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == hash
		if terminating(p) {
			oldTerminating = oldTerminating || !isNew
			continue
		}
		if isNew {
			newPods = append(newPods, p)
		} else {
			oldPods = append(oldPods, p)
		}
	}

	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		if len(oldPods) > 0 {
			for _, p := range oldPods {
				c.deletePod(p, nil)
			}
			return true
		}
		if oldTerminating {
			return false
		}
		return c.scalePods(d, hash, newPods, want)
	}

	if len(oldPods) == 0 {
		return c.scalePods(d, hash, newPods, want)
	}

	maxSurge, maxUnavailable := surgeAndUnavailable(d, want)
	changed := false
	total := len(newPods) + len(oldPods)
	if len(newPods) > want {
		// scalePods ranks in place and deletes from the front: the kept Pods are the tail.
		changed = c.scalePods(d, hash, newPods, want)
		newPods = newPods[len(newPods)-want:]
	} else if add := min(want+maxSurge-total, want-len(newPods)); add > 0 {
		for i := 0; i < add; i++ {
			newPods = append(newPods, c.createDeploymentPod(d, hash))
		}
		total += add
		changed = true
	}

	minAvailable := want - maxUnavailable
	newUnavailable := 0
	for _, p := range newPods {
		if !podReady(p) {
			newUnavailable++
		}
	}
	maxScaledDown := total - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return changed
	}
	rankForDeletion(oldPods)
	// Unhealthy old Pods go first: they would otherwise block the rollout.
	var healthyOld []*corev1.Pod
	for _, p := range oldPods {
		if !podReady(p) && maxScaledDown > 0 {
			c.deletePod(p, nil)
			maxScaledDown--
			changed = true
			continue
		}
		healthyOld = append(healthyOld, p)
	}
	available := 0
	for _, p := range append(append([]*corev1.Pod{}, newPods...), healthyOld...) {
		if podReady(p) {
			available++
		}
	}
	for i := 0; i < available-minAvailable && i < len(healthyOld); i++ {
		c.deletePod(healthyOld[i], nil)
		changed = true
	}
	return changed
}

// scalePods brings the Pods of the current template to n, creating at once or deleting the
// least useful first.
func (c *Cluster) scalePods(d *appsv1.Deployment, hash string, pods []*corev1.Pod, n int) bool {
	switch {
	case len(pods) < n:
		for i := len(pods); i < n; i++ {
			c.createDeploymentPod(d, hash)
		}
		return true
	case len(pods) > n:
		rankForDeletion(pods)
		for _, p := range pods[:len(pods)-n] {
			c.deletePod(p, nil)
		}
		return true
	}
	return false
}

// rankForDeletion sorts Pods least useful first, as controller.ActivePods does: unscheduled,
// then pending, then not ready, then ready for the shortest time, then newest.
func rankForDeletion(pods []*corev1.Pod) {
	readySince := func(p *corev1.Pod) int64 {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return cond.LastTransitionTime.UnixNano()
			}
		}
		return 0
	}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
			return a.Spec.NodeName == ""
		}
		if (a.Status.Phase == corev1.PodPending) != (b.Status.Phase == corev1.PodPending) {
			return a.Status.Phase == corev1.PodPending
		}
		if podReady(a) != podReady(b) {
			return !podReady(a)
		}
		if ra, rb := readySince(a), readySince(b); ra != rb {
			return ra > rb
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return b.CreationTimestamp.Before(&a.CreationTimestamp)
		}
		return a.UID > b.UID
	})
}

func surgeAndUnavailable(d *appsv1.Deployment, want int) (int, int) {
	surge, unavail := intstr.FromString("25%"), intstr.FromString("25%")
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			surge = *ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			unavail = *ru.MaxUnavailable
		}
	}
	s, err := intstr.GetScaledValueFromIntOrPercent(&surge, want, true)
	if err != nil {
		s = 0
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(&unavail, want, false)
	if err != nil {
		u = 0
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return s, u
}

func (c *Cluster) createDeploymentPod(d *appsv1.Deployment, hash string) *corev1.Pod {
	p := &corev1.Pod{}
	p.Namespace = d.Namespace
	p.Name = c.generateName(d.Name + "-" + hash + "-")
	p.Labels = map[string]string{}
	for k, v := range d.Spec.Template.Labels {
		p.Labels[k] = v
	}
	p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	for k, v := range d.Spec.Template.Annotations {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
	p.OwnerReferences = append(p.OwnerReferences, controllerRef(d, "apps/v1", "Deployment"))
	p.Spec = *d.Spec.Template.Spec.DeepCopy()
	c.defaultPod(p)
	if err := c.create(p); err != nil {
		panic("sim: generated Pod name taken: " + err.Error())
	}
	return p
}

// updateDeploymentStatus counts live Pods, as ReplicaSet status does (terminating Pods are not
// replicas).
func (c *Cluster) updateDeploymentStatus(d *appsv1.Deployment, hash string) bool {
	st := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Conditions: d.Status.Conditions,
		CollisionCount: d.Status.CollisionCount}
	for _, p := range c.deploymentPods(d) {
		if terminating(p) {
			continue
		}
		st.Replicas++
		if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == hash {
			st.UpdatedReplicas++
		}
		if podReady(p) {
			st.ReadyReplicas++
			st.AvailableReplicas++
		}
	}
	if u := int32(specReplicas(d.Spec.Replicas)) - st.AvailableReplicas; u > 0 {
		st.UnavailableReplicas = u
	}
	next := d.DeepCopy()
	next.Status = st
	return c.put(next)
}
