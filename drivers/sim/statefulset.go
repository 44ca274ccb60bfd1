package sim

import (
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The StatefulSet controller, after pkg/controller/statefulset (stateful_set_control.go), with
// MaxUnavailableStatefulSet on as in Kubernetes 1.37. It takes at most one disruptive step per
// sync in OrderedReady (monotonic) mode and waits to see it take effect. Simplified: no
// ControllerRevision objects (revisions live inside the cluster), no minReadySeconds, no
// Recreate strategy, no failed-Pod replacement (simulated Pods never fail).

func (c *Cluster) syncStatefulSets() bool {
	changed := false
	for _, o := range c.list(KindStatefulSet) {
		if c.syncStatefulSet(o.(*appsv1.StatefulSet)) {
			changed = true
		}
	}
	return changed
}

func (c *Cluster) syncStatefulSet(set *appsv1.StatefulSet) bool {
	updateRev := set.Name + "-" + templateHash(&set.Spec.Template)
	c.revisions[updateRev] = *set.Spec.Template.DeepCopy()
	currentRev := set.Status.CurrentRevision
	if _, known := c.revisions[currentRev]; !known {
		currentRev = updateRev
	}
	changed := false
	// A StatefulSet being deleted only updates its status: the garbage collector removes its Pods.
	if set.DeletionTimestamp == nil {
		if c.adoptSetPods(set) {
			changed = true
		}
		replicas, condemned := c.partitionSetPods(set)
		changed = c.stepStatefulSet(set, replicas, condemned, currentRev, updateRev)
	}
	if c.updateStatefulSetStatus(set, currentRev, updateRev) {
		changed = true
	}
	return changed
}

func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

// setOrdinal parses "<set>-<ordinal>", -1 when the name carries none.
func setOrdinal(set *appsv1.StatefulSet, name string) int {
	rest, ok := strings.CutPrefix(name, set.Name+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// adoptSetPods is the controller's ClaimPods: a Pod of the set's name and namespace that no
// controller owns (left by a StatefulSet deleted with propagation Orphan) and that its selector
// matches becomes the set's.
func (c *Cluster) adoptSetPods(set *appsv1.StatefulSet) bool {
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil || sel.Empty() {
		return false
	}
	changed := false
	for _, p := range c.pods() {
		if p.Namespace != set.Namespace || metav1.GetControllerOfNoCopy(p) != nil || p.DeletionTimestamp != nil ||
			setOrdinal(set, p.Name) < 0 || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		next := p.DeepCopy()
		next.OwnerReferences = append(next.OwnerReferences, controllerRef(set, "apps/v1", "StatefulSet"))
		if c.put(next) {
			changed = true
		}
	}
	return changed
}

// setPods lists the Pods the set controls, in ordinal order.
func (c *Cluster) setPods(set *appsv1.StatefulSet) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range c.pods() {
		if p.Namespace == set.Namespace && controlledBy(p, set) && setOrdinal(set, p.Name) >= 0 {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return setOrdinal(set, out[i].Name) < setOrdinal(set, out[j].Name) })
	return out
}

// partitionSetPods returns the Pods at each wanted ordinal (nil where none exists) and the
// condemned ones beyond, highest ordinal first.
func (c *Cluster) partitionSetPods(set *appsv1.StatefulSet) (replicas, condemned []*corev1.Pod) {
	start := startOrdinal(set)
	replicas = make([]*corev1.Pod, specReplicas(set.Spec.Replicas))
	for _, p := range c.setPods(set) {
		ord := setOrdinal(set, p.Name)
		if ord >= start && ord < start+len(replicas) {
			replicas[ord-start] = p
		} else {
			condemned = append(condemned, p)
		}
	}
	sort.Slice(condemned, func(i, j int) bool {
		return setOrdinal(set, condemned[i].Name) > setOrdinal(set, condemned[j].Name)
	})
	return replicas, condemned
}

func specReplicas(p *int32) int {
	if p == nil {
		return 1
	}
	return int(*p)
}

// stepStatefulSet makes the controller's moves for one sync and reports whether it changed
// anything. In monotonic mode it returns after the first create or delete, and before any move
// while a wanted Pod is missing, terminating or not running and ready: so a member that never
// becomes ready on an old revision is never replaced (kubernetes#67250).
func (c *Cluster) stepStatefulSet(set *appsv1.StatefulSet, replicas, condemned []*corev1.Pod, currentRev, updateRev string) bool {
	monotonic := set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	start := startOrdinal(set)
	changed := false

	var firstUnhealthy *corev1.Pod
	for _, p := range replicas {
		if p != nil && unavailable(p) {
			firstUnhealthy = p
			break
		}
	}
	if firstUnhealthy == nil {
		for i := len(condemned) - 1; i >= 0; i-- {
			if unavailable(condemned[i]) {
				firstUnhealthy = condemned[i]
				break
			}
		}
	}

	for i, p := range replicas {
		ord := start + i
		if p == nil {
			rev := updateRev
			if c.createsAtCurrentRevision(set, ord) {
				rev = currentRev
			}
			if c.createSetClaims(set, ord) {
				changed = true
			}
			// The real controller creates no Pod over a claim being deleted ("pvc ... is being
			// deleted"): it waits until the claim is gone, then creates a new one and the Pod.
			// A Pod made over it would keep it in use, and the claim would never go.
			if c.setClaimDeleting(set, ord) {
				if monotonic {
					return changed
				}
				continue
			}
			if p = c.createSetPod(set, ord, rev); p == nil {
				if monotonic {
					return changed
				}
				continue
			}
			replicas[i] = p
			changed = true
			if monotonic {
				return true
			}
		}
		if p.Status.Phase == corev1.PodPending {
			if c.createSetClaims(set, ord) {
				changed = true
			}
		}
		if terminating(p) && monotonic {
			return changed
		}
		if !runningAndReady(p) && monotonic {
			return changed
		}
	}

	if c.deleteScaledClaims(set, replicas, condemned) {
		changed = true
	}

	for _, p := range condemned {
		if terminating(p) {
			if monotonic {
				return changed
			}
			continue
		}
		if !runningAndReady(p) && monotonic && p != firstUnhealthy {
			return changed
		}
		c.deletePod(p, nil)
		changed = true
		if monotonic {
			return true
		}
	}

	if set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return changed
	}
	return c.rollStatefulSet(set, replicas, updateRev, monotonic) || changed
}

// createsAtCurrentRevision is newVersionedStatefulSetPod's rule: below the partition, or with
// no rollingUpdate block below status.currentReplicas, a new Pod gets the current revision.
func (c *Cluster) createsAtCurrentRevision(set *appsv1.StatefulSet, ord int) bool {
	if set.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType && set.Spec.UpdateStrategy.Type != "" {
		return false
	}
	ru := set.Spec.UpdateStrategy.RollingUpdate
	if ru == nil {
		return ord < startOrdinal(set)+int(set.Status.CurrentReplicas)
	}
	return ru.Partition != nil && ord < startOrdinal(set)+int(*ru.Partition)
}

// rollStatefulSet is the rolling update once every wanted Pod exists: delete the highest-ordinal
// Pod not on the update revision, within maxUnavailable.
func (c *Cluster) rollStatefulSet(set *appsv1.StatefulSet, replicas []*corev1.Pod, updateRev string, monotonic bool) bool {
	updateMin := 0
	maxUnavailable := 1
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		if ru.Partition != nil {
			updateMin = int(*ru.Partition)
		}
		if ru.MaxUnavailable != nil {
			n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, len(replicas), false)
			if err == nil && n > 1 {
				maxUnavailable = n
			}
		}
	}
	unavailablePods, oldUnavailable := 0, 0
	for _, p := range replicas {
		if p == nil || unavailable(p) {
			unavailablePods++
			if p != nil && !monotonic && revision(p) != updateRev && !terminating(p) {
				oldUnavailable++
			}
		}
	}
	if unavailablePods >= maxUnavailable && oldUnavailable == 0 {
		return false
	}
	changed := false
	if !monotonic {
		// Parallel: first replace what is already unavailable on an old revision.
		for t := len(replicas) - 1; t >= updateMin; t-- {
			p := replicas[t]
			if p != nil && revision(p) != updateRev && !runningAndReady(p) && !terminating(p) {
				c.deletePod(p, nil)
				changed = true
			}
		}
	}
	budget := maxUnavailable - unavailablePods
	for t := len(replicas) - 1; t >= updateMin && budget > 0; t-- {
		p := replicas[t]
		if p != nil && revision(p) != updateRev && !unavailable(p) {
			c.deletePod(p, nil)
			budget--
			changed = true
		}
	}
	return changed
}

// createSetPod creates the Pod of an ordinal from the template of a revision, with the identity
// the controller gives it and its claims mounted.
func (c *Cluster) createSetPod(set *appsv1.StatefulSet, ord int, rev string) *corev1.Pod {
	tmpl := c.revisions[rev]
	name := set.Name + "-" + strconv.Itoa(ord)
	p := &corev1.Pod{}
	p.Namespace = set.Namespace
	p.Name = name
	p.Labels = map[string]string{}
	for k, v := range tmpl.Labels {
		p.Labels[k] = v
	}
	p.Labels[appsv1.StatefulSetRevisionLabel] = rev
	p.Labels[appsv1.StatefulSetPodNameLabel] = name
	p.Labels[appsv1.PodIndexLabel] = strconv.Itoa(ord)
	for k, v := range tmpl.Annotations {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
	p.OwnerReferences = append(p.OwnerReferences, controllerRef(set, "apps/v1", "StatefulSet"))
	p.Spec = *tmpl.Spec.DeepCopy()
	p.Spec.Hostname = name
	p.Spec.Subdomain = set.Spec.ServiceName
	for _, t := range set.Spec.VolumeClaimTemplates {
		vol := corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(set, t.Name, ord)}}}
		replaced := false
		for i := range p.Spec.Volumes {
			if p.Spec.Volumes[i].Name == t.Name {
				p.Spec.Volumes[i] = vol
				replaced = true
			}
		}
		if !replaced {
			p.Spec.Volumes = append(p.Spec.Volumes, vol)
		}
	}
	c.defaultPod(p)
	if err := c.create(p); err != nil {
		// The set's Pods are listed from the same store a moment ago: a name taken by a Pod the
		// set does not control is an orphan the real controller would also fail to replace.
		return nil
	}
	return p
}

// updateStatefulSetStatus recomputes status from the set's Pods as computeReplicaStatus does, and
// completes a rollout once every wanted member is updated and ready.
func (c *Cluster) updateStatefulSetStatus(set *appsv1.StatefulSet, currentRev, updateRev string) bool {
	st := appsv1.StatefulSetStatus{
		ObservedGeneration: set.Generation,
		CurrentRevision:    currentRev,
		UpdateRevision:     updateRev,
		CollisionCount:     set.Status.CollisionCount,
		Conditions:         set.Status.Conditions,
	}
	if st.CollisionCount == nil {
		st.CollisionCount = new(int32)
	}
	for _, p := range c.setPods(set) {
		st.Replicas++
		if runningAndReady(p) {
			st.ReadyReplicas++
			st.AvailableReplicas++
		}
		if !terminating(p) {
			if revision(p) == currentRev {
				st.CurrentReplicas++
			}
			if revision(p) == updateRev {
				st.UpdatedReplicas++
			}
		}
	}
	want := int32(specReplicas(set.Spec.Replicas))
	if st.UpdatedReplicas == want && st.ReadyReplicas == want && st.Replicas == want {
		st.CurrentReplicas = st.UpdatedReplicas
		st.CurrentRevision = st.UpdateRevision
	}
	next := set.DeepCopy()
	next.Status = st
	return c.put(next)
}

func revision(p *corev1.Pod) string {
	if h, ok := p.Labels[appsv1.StatefulSetRevisionLabel]; ok {
		return h
	}
	return p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
}
