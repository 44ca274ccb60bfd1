package sim

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Volumes: a claim binds at once (Immediate) or when its first Pod is scheduled
// (WaitForFirstConsumer), and then holds that node's zone, as a zonal CSI disk does: a member
// whose zone has no room stays Pending. Deleting a claim a scheduled Pod mounts leaves it
// terminating until no such Pod exists (the PVC protection controller).

// AddStorageClass creates a storage class; waitForFirstConsumer picks its volume binding mode.
func (c *Cluster) AddStorageClass(name string, waitForFirstConsumer bool) error {
	mode := storagev1.VolumeBindingImmediate
	if waitForFirstConsumer {
		mode = storagev1.VolumeBindingWaitForFirstConsumer
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	expand := true
	sc := &storagev1.StorageClass{Provisioner: "csi.sim.celld.io", VolumeBindingMode: &mode, ReclaimPolicy: &reclaim, AllowVolumeExpansion: &expand}
	sc.Name = name
	if err := c.create(sc); err != nil {
		return fmt.Errorf("add storage class %s: %w", name, err)
	}
	return nil
}

// SetVolumeExpansion sets a storage class's allowVolumeExpansion, as its administrator may.
func (c *Cluster) SetVolumeExpansion(name string, allow bool) error {
	sc, _ := c.get(KindStorageClass, "", name).(*storagev1.StorageClass)
	if sc == nil {
		return fmt.Errorf("storage class %s does not exist", name)
	}
	next := sc.DeepCopy()
	next.AllowVolumeExpansion = &allow
	c.put(next)
	return nil
}

// FailExpansion makes the resizer fail to expand claim namespace/name (true) or succeed again
// (false): the claim then carries a ControllerResizeError condition and keeps its capacity.
func (c *Cluster) FailExpansion(namespace, name string, fail bool) {
	if c.expansionFails == nil {
		c.expansionFails = map[string]bool{}
	}
	c.expansionFails[namespace+"/"+name] = fail
}

// ResizeClaim raises a claim's storage request as a person with kubectl would.
func (c *Cluster) ResizeClaim(namespace, name string, size resource.Quantity) error {
	pvc := c.claim(namespace, name)
	if pvc == nil {
		return fmt.Errorf("claim %s/%s does not exist", namespace, name)
	}
	next := pvc.DeepCopy()
	next.Spec.Resources.Requests[corev1.ResourceStorage] = size
	c.put(next)
	return nil
}

// ClearExpansionFailures makes the resizer succeed on every claim again, and the kubelet grow
// every filesystem online.
func (c *Cluster) ClearExpansionFailures() { c.expansionFails, c.offline = nil, nil }

// GrowFilesystemsOffline makes the driver of claim namespace/name grow its filesystem only when
// the volume is mounted again (true), as drivers without online expansion do, or online again
// (false): once its volume is expanded the claim says FileSystemResizePending until a Pod that
// mounts it starts.
func (c *Cluster) GrowFilesystemsOffline(namespace, name string, offline bool) {
	if c.offline == nil {
		c.offline = map[string]bool{}
	}
	c.offline[namespace+"/"+name] = offline
}

// mountedSince: a Pod that mounts the claim started at or after t.
func (c *Cluster) mountedSince(pvc *corev1.PersistentVolumeClaim, t time.Time) bool {
	for _, p := range c.pods() {
		if p.Namespace == pvc.Namespace && mounts(p, pvc.Name) && p.DeletionTimestamp == nil && !p.CreationTimestamp.Time.Before(t) {
			return true
		}
	}
	return false
}

// expandClaims is the external resizer and the kubelet together: a bound claim that asks for
// more than it has is expanded, online, in one step; one the resizer is made to fail carries
// ControllerResizeError instead.
func (c *Cluster) expandClaims() bool {
	changed := false
	for _, o := range c.list(KindPVC) {
		pvc := o.(*corev1.PersistentVolumeClaim)
		want, have := pvc.Spec.Resources.Requests[corev1.ResourceStorage], pvc.Status.Capacity[corev1.ResourceStorage]
		if pvc.Status.Phase != corev1.ClaimBound {
			continue
		}
		if want.Cmp(have) <= 0 {
			// The kubelet grows a filesystem left pending once a Pod mounts the volume again.
			if len(pvc.Status.Conditions) > 0 && pvc.Status.Conditions[0].Type == corev1.PersistentVolumeClaimFileSystemResizePending &&
				c.mountedSince(pvc, pvc.Status.Conditions[0].LastTransitionTime.Time) {
				next := pvc.DeepCopy()
				next.Status.Conditions = nil
				if c.put(next) {
					changed = true
				}
			}
			continue
		}
		next := pvc.DeepCopy()
		next.Status.Conditions = nil
		if c.expansionFails[pvc.Namespace+"/"+pvc.Name] {
			next.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimControllerResizeError,
				Status: corev1.ConditionTrue, Message: "the volume's quota is exhausted"}}
		} else {
			next.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: want.DeepCopy()}
			if c.offline[pvc.Namespace+"/"+pvc.Name] {
				// A second later than now: a Pod that started this very tick mounted the old size.
				next.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimFileSystemResizePending,
					Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(c.now.Add(time.Second)),
					Message: "Waiting for user to (re-)start a pod to finish file system resize of volume on node."}}
			}
		}
		if c.put(next) {
			changed = true
		}
	}
	return changed
}

// DeleteStorageClass removes a storage class; claims already bound keep their volumes.
func (c *Cluster) DeleteStorageClass(name string) error {
	if _, err := c.delete(KindStorageClass, "", name, deletion{}); err != nil {
		return fmt.Errorf("delete storage class %s: %w", name, err)
	}
	return nil
}

// claimClass returns the claim's storage class, and whether the claim can bind at all: a claim
// naming a class that does not exist stays Pending.
func (c *Cluster) claimClass(pvc *corev1.PersistentVolumeClaim) (*storagev1.StorageClass, bool) {
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return nil, true
	}
	sc, _ := c.get(KindStorageClass, "", *pvc.Spec.StorageClassName).(*storagev1.StorageClass)
	return sc, sc != nil
}

func waitsForConsumer(sc *storagev1.StorageClass) bool {
	return sc != nil && sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// bindClaims provisions the Pending claims that bind immediately.
func (c *Cluster) bindClaims() bool {
	changed := false
	for _, o := range c.list(KindPVC) {
		pvc := o.(*corev1.PersistentVolumeClaim)
		if pvc.Status.Phase != corev1.ClaimPending || pvc.DeletionTimestamp != nil {
			continue
		}
		if sc, ok := c.claimClass(pvc); ok && !waitsForConsumer(sc) {
			if c.bindClaim(pvc, "") {
				changed = true
			}
		}
	}
	return changed
}

func (c *Cluster) bindClaim(pvc *corev1.PersistentVolumeClaim, zone string) bool {
	next := pvc.DeepCopy()
	next.Spec.VolumeName = "pvc-" + string(pvc.UID)
	next.Status.Phase = corev1.ClaimBound
	next.Status.AccessModes = pvc.Spec.AccessModes
	next.Status.Capacity = pvc.Spec.Resources.Requests
	if zone != "" {
		c.claimZone[pvc.UID] = zone
	}
	return c.put(next)
}

// protectClaims removes the protection finalizer from claims being deleted that no scheduled
// Pod mounts any more, whatever that Pod's phase: a Pod stuck on a lost node keeps its disk.
func (c *Cluster) protectClaims() bool {
	changed := false
	for _, o := range c.list(KindPVC) {
		pvc := o.(*corev1.PersistentVolumeClaim)
		if pvc.DeletionTimestamp == nil || c.claimInUse(pvc) {
			continue
		}
		next := pvc.DeepCopy()
		if removeFinalizer(next, PVCProtectionFinalizer) && c.put(next) {
			changed = true
		}
	}
	return changed
}

func (c *Cluster) claimInUse(pvc *corev1.PersistentVolumeClaim) bool {
	for _, p := range c.pods() {
		if p.Namespace == pvc.Namespace && p.Spec.NodeName != "" && mounts(p, pvc.Name) {
			return true
		}
	}
	return false
}

func mounts(p *corev1.Pod, claim string) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}

// LoseDisk marks a claim Lost, as when its volume is deleted behind Kubernetes' back.
func (c *Cluster) LoseDisk(namespace, name string) error {
	pvc := c.claim(namespace, name)
	if pvc == nil {
		return fmt.Errorf("lose disk %s/%s: no such claim", namespace, name)
	}
	next := pvc.DeepCopy()
	next.Status.Phase = corev1.ClaimLost
	c.put(next)
	return nil
}
