package kube

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// The member Pods and the Nodes are the largest objects the operator caches, and it reads little
// of them: what events.Normalize, the fencing and the capacity sampler look at. The transforms
// below keep that and drop the rest before an object enters a cache. Every premise that decides a
// destructive action reads the object fresh from the API server, never from these caches.
// TestStrippedCachesDecideAlike fails when a decision reads a field dropped here.

// stripPod keeps of a member Pod its metadata (but managedFields), its node, its disk volumes,
// each container's name and requests (the capacity sampler's denominators), and its phase and
// conditions.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return dropManagedFields(obj)
	}
	p.ManagedFields = nil
	var volumes []corev1.Volume
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			volumes = append(volumes, corev1.Volume{Name: v.Name,
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: v.PersistentVolumeClaim}})
		}
	}
	var containers []corev1.Container
	for _, c := range p.Spec.Containers {
		containers = append(containers, corev1.Container{Name: c.Name,
			Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests}})
	}
	p.Spec = corev1.PodSpec{NodeName: p.Spec.NodeName, Volumes: volumes, Containers: containers}
	conditions := make([]corev1.PodCondition, 0, len(p.Status.Conditions))
	for _, c := range p.Status.Conditions {
		k := corev1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}
		// Who takes a member away (a drain's eviction), and why no node takes it back, are what
		// the fleet's status tells a person during maintenance.
		switch {
		case c.Type == corev1.DisruptionTarget:
			k.Reason = c.Reason
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse:
			k.Reason, k.Message = c.Reason, c.Message
		}
		conditions = append(conditions, k)
	}
	if len(conditions) == 0 {
		conditions = nil
	}
	p.Status = corev1.PodStatus{Phase: p.Status.Phase, Conditions: conditions}
	return p, nil
}

// stripNode keeps of a Node its metadata (but managedFields), its spec (taints, unschedulable)
// and its conditions; the images, addresses, capacity and system info go.
func stripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return dropManagedFields(obj)
	}
	n.ManagedFields = nil
	n.Status = corev1.NodeStatus{Conditions: n.Status.Conditions}
	return n, nil
}

// CacheForm is what the operator's caches keep of obj (it may be changed in place): the
// benchmark measures its caches' size on the same form.
func CacheForm(obj any) any {
	var out any
	switch obj.(type) {
	case *corev1.Pod:
		out, _ = stripPod(obj)
	case *corev1.Node:
		out, _ = stripNode(obj)
	case *v1alpha1.CelldReservation:
		out, _ = keepSpecWriters(obj)
	default:
		out, _ = dropManagedFields(obj)
	}
	return out
}
