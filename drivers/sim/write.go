package sim

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// PVCProtectionFinalizer is what the API server's admission puts on every claim, so that a claim
// a Pod uses outlives its deletion request until no Pod uses it.
const PVCProtectionFinalizer = "kubernetes.io/pvc-protection"

func (c *Cluster) nextRV() string {
	c.rv++
	return strconv.FormatUint(c.rv, 10)
}

// emit queues the event a watch would deliver; the event carries its own copy, so nothing the
// caller keeps aliases the cluster.
func (c *Cluster) emit(obj object, gone bool) {
	ev, err := Observe(copyOf(obj), gone, c.now)
	if err != nil {
		panic(fmt.Sprintf("sim: %v", err))
	}
	c.queue = append(c.queue, ev)
}

// create stores obj (which the cluster now owns) as a new object.
func (c *Cluster) create(obj object) error {
	k := mustKind(obj)
	if !row(k).Namespaced {
		obj.SetNamespace("")
	}
	if obj.GetName() == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("create %s: metadata.name is required", k))
	}
	if _, ok := c.objs[k][keyOf(obj)]; ok {
		return apierrors.NewAlreadyExists(row(k).Resource, obj.GetName())
	}
	c.uidSeq++
	obj.SetUID(types.UID(fmt.Sprintf("uid-%06d", c.uidSeq)))
	obj.SetCreationTimestamp(metav1.NewTime(c.now))
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	obj.SetGeneration(0)
	if row(k).Generation {
		obj.SetGeneration(1)
	}
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		addFinalizer(pvc, PVCProtectionFinalizer)
		if pvc.Status.Phase == "" {
			pvc.Status.Phase = corev1.ClaimPending
		}
	}
	if p, ok := obj.(*corev1.Pod); ok && p.Status.Phase == "" {
		p.Status.Phase = corev1.PodPending
	}
	clearTypeMeta(obj)
	obj.SetResourceVersion(c.nextRV())
	c.objs[k][keyOf(obj)] = obj
	c.byUID[obj.GetUID()] = obj
	c.emit(obj, false)
	return nil
}

// clearTypeMeta drops apiVersion and kind: typed clients and informers hand objects out
// without them, so a reader that needs them must not find them here either.
func clearTypeMeta(obj object) { obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{}) }

// put stores obj, a changed copy of a stored object, and reports whether it differs from what
// was stored. Like the API server it writes nothing (no new resourceVersion, no event) for an
// update that changes nothing, bumps generation when the spec changed, and removes an object
// being deleted once its last finalizer is gone (unless a kubelet still has to finish it).
func (c *Cluster) put(obj object) bool {
	k := mustKind(obj)
	old, ok := c.objs[k][keyOf(obj)]
	if !ok || old.GetUID() != obj.GetUID() {
		panic(fmt.Sprintf("sim: put %s %s: not the stored object", k, keyOf(obj)))
	}
	obj.SetResourceVersion(old.GetResourceVersion())
	obj.SetGeneration(old.GetGeneration())
	clearTypeMeta(obj)
	if equality.Semantic.DeepEqual(old, obj) {
		return false
	}
	// The API server's BeforeDelete moves metadata.generation on when it sets the deletion
	// timestamp, as a spec change does: a deletion is a change of intent.
	deleting := old.GetDeletionTimestamp() == nil && obj.GetDeletionTimestamp() != nil && old.GetGeneration() > 0
	if deleting || (row(k).Generation && !equality.Semantic.DeepEqual(structField(old, "Spec").Interface(), structField(obj, "Spec").Interface())) {
		obj.SetGeneration(old.GetGeneration() + 1)
	}
	if obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 && !graceful(obj) {
		c.remove(old)
		return true
	}
	obj.SetResourceVersion(c.nextRV())
	c.objs[k][keyOf(obj)] = obj
	c.byUID[obj.GetUID()] = obj
	c.emit(obj, false)
	return true
}

// graceful: the object is in a graceful deletion (a Pod whose kubelet has yet to finish it).
func graceful(o object) bool {
	g := o.GetDeletionGracePeriodSeconds()
	return g != nil && *g > 0
}

// remove takes a stored object out of the cluster; its Gone event carries a new resourceVersion,
// as the final state of a watch's delete does.
func (c *Cluster) remove(obj object) {
	k := mustKind(obj)
	if p, ok := obj.(*corev1.Pod); ok {
		c.noteRemovedPod(p)
	}
	delete(c.objs[k], keyOf(obj))
	delete(c.byUID, obj.GetUID())
	delete(c.runtime, obj.GetUID())
	delete(c.claimZone, obj.GetUID())
	last := copyOf(obj)
	last.SetResourceVersion(c.nextRV())
	c.tombstones[k][keyOf(obj)] = last
	c.emit(last, true)
}

// deletion is a delete request's options.
type deletion struct {
	// grace overrides the Pod's terminationGracePeriodSeconds; 0 removes the Pod at once.
	grace *int64
	uid   types.UID
	rv    string
}

// delete requests the deletion of a stored object the way the API server handles a DELETE. It
// reports whether anything changed: a graceful delete of a Pod already terminating changes
// nothing unless it shortens the grace period.
func (c *Cluster) delete(k Kind, namespace, name string, opts deletion) (bool, error) {
	obj := c.get(k, namespace, name)
	if obj == nil {
		return false, apierrors.NewNotFound(row(k).Resource, name)
	}
	if opts.uid != "" && opts.uid != obj.GetUID() {
		return false, apierrors.NewConflict(row(k).Resource, name,
			fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", opts.uid, obj.GetUID()))
	}
	if opts.rv != "" && opts.rv != obj.GetResourceVersion() {
		return false, apierrors.NewConflict(row(k).Resource, name,
			fmt.Errorf("precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", opts.rv, obj.GetResourceVersion()))
	}
	if p, ok := obj.(*corev1.Pod); ok {
		return c.deletePod(p, opts.grace), nil
	}
	if len(obj.GetFinalizers()) == 0 {
		c.remove(obj)
		return true, nil
	}
	if obj.GetDeletionTimestamp() != nil {
		return false, nil
	}
	next := copyOf(obj)
	now := metav1.NewTime(c.now)
	next.SetDeletionTimestamp(&now)

	zero := int64(0)
	next.SetDeletionGracePeriodSeconds(&zero)
	return c.put(next), nil
}

// deletePod follows the API server's graceful deletion of Pods: a Pod no node runs goes at once,
// grace 0 goes at once, otherwise deletionTimestamp is set to the moment the grace period ends
// and the Pod's kubelet removes it (a kubelet that is gone never does).
func (c *Cluster) deletePod(p *corev1.Pod, graceOverride *int64) bool {
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		grace = *p.Spec.TerminationGracePeriodSeconds
	}
	if graceOverride != nil {
		grace = *graceOverride
	}
	if grace <= 0 || p.Spec.NodeName == "" {
		c.remove(p)
		return true
	}
	end := metav1.NewTime(c.now.Add(time.Duration(grace) * time.Second))
	if p.DeletionTimestamp != nil && !end.Before(p.DeletionTimestamp) {
		return false
	}
	next := p.DeepCopy()
	next.DeletionTimestamp = &end
	next.DeletionGracePeriodSeconds = &grace
	return c.put(next)
}

func addFinalizer(o metav1.Object, f string) bool {
	for _, x := range o.GetFinalizers() {
		if x == f {
			return false
		}
	}
	o.SetFinalizers(append(o.GetFinalizers(), f))
	return true
}

func removeFinalizer(o metav1.Object, f string) bool {
	var out []string
	for _, x := range o.GetFinalizers() {
		if x != f {
			out = append(out, x)
		}
	}
	if len(out) == len(o.GetFinalizers()) {
		return false
	}
	o.SetFinalizers(out)
	return true
}
