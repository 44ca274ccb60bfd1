package sim

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The StatefulSet controller's volume claims: one per template and ordinal, created before the
// Pod that mounts them and, per persistentVolumeClaimRetentionPolicy, kept or removed.

func claimName(set *appsv1.StatefulSet, template string, ord int) string {
	return template + "-" + set.Name + "-" + strconv.Itoa(ord)
}

// createSetClaims creates the ordinal's missing claims from the volumeClaimTemplates, labelled
// with the template's labels and the set's selector labels, as the real controller does.
func (c *Cluster) createSetClaims(set *appsv1.StatefulSet, ord int) bool {
	changed := false
	for _, t := range set.Spec.VolumeClaimTemplates {
		name := claimName(set, t.Name, ord)
		if c.claim(set.Namespace, name) != nil {
			continue
		}
		pvc := t.DeepCopy()
		pvc.Name = name
		pvc.Namespace = set.Namespace
		pvc.UID, pvc.ResourceVersion = "", ""
		pvc.Status = corev1.PersistentVolumeClaimStatus{}
		if pvc.Labels == nil {
			pvc.Labels = map[string]string{}
		}
		if set.Spec.Selector != nil {
			for k, v := range set.Spec.Selector.MatchLabels {
				pvc.Labels[k] = v
			}
		}
		if rp := set.Spec.PersistentVolumeClaimRetentionPolicy; rp != nil && rp.WhenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
			ref := controllerRef(set, "apps/v1", "StatefulSet")
			f := false
			ref.Controller = &f
			pvc.OwnerReferences = append(pvc.OwnerReferences, ref)
		}
		if c.create(pvc) == nil {
			changed = true
		}
	}
	return changed
}

// setClaimDeleting: a claim of the ordinal is being deleted.
func (c *Cluster) setClaimDeleting(set *appsv1.StatefulSet, ord int) bool {
	for _, t := range set.Spec.VolumeClaimTemplates {
		if pvc := c.claim(set.Namespace, claimName(set, t.Name, ord)); pvc != nil && pvc.DeletionTimestamp != nil {
			return true
		}
	}
	return false
}

// deleteScaledClaims honours whenScaled: Delete, removing the claims of condemned ordinals once
// their Pod is gone (Kubernetes does it through an owner reference to the condemned Pod).
func (c *Cluster) deleteScaledClaims(set *appsv1.StatefulSet, replicas, condemned []*corev1.Pod) bool {
	rp := set.Spec.PersistentVolumeClaimRetentionPolicy
	if rp == nil || rp.WhenScaled != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
		return false
	}
	live := map[string]bool{}
	for _, p := range condemned {
		live[p.Name] = true
	}
	changed := false
	start, end := startOrdinal(set), startOrdinal(set)+len(replicas)
	for _, o := range c.list(KindPVC) {
		pvc := o.(*corev1.PersistentVolumeClaim)
		if pvc.Namespace != set.Namespace || pvc.DeletionTimestamp != nil {
			continue
		}
		for _, t := range set.Spec.VolumeClaimTemplates {
			rest, ok := strings.CutPrefix(pvc.Name, t.Name+"-")
			if !ok {
				continue
			}
			ord := setOrdinal(set, rest)
			if ord < 0 || (ord >= start && ord < end) || live[set.Name+"-"+strconv.Itoa(ord)] {
				continue
			}
			if ok, _ := c.delete(KindPVC, pvc.Namespace, pvc.Name, deletion{}); ok {
				changed = true
			}
		}
	}
	return changed
}
