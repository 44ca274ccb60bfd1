package kube

import (
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/reservation"
)

// handler enqueues the fleets an informer's object matters to, and nothing else: the sync reads
// the caches afresh, so what changed is never passed along. answer says whether the object is
// one whose change answers a fleet's actions (answers).
func (i *Informers) handler(enqueue func(key events.FleetKey, answer bool)) cache.ResourceEventHandler {
	each := func(obj any) {
		answer := answers(obj)
		for _, k := range i.FleetKeys(obj) {
			enqueue(k, answer)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { each(obj) },
		UpdateFunc: func(oldObj, newObj any) {
			if !changed(oldObj, newObj) {
				return
			}
			// A relabelled object may have moved from one fleet to another: both hear of it.
			each(oldObj)
			each(newObj)
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			each(obj)
		},
	}
}

// AddHandlers sends every cache's changes to enqueue, as fleet keys.
func (i *Informers) AddHandlers(enqueue func(key events.FleetKey, answer bool)) error {
	h := i.handler(enqueue)
	for _, inf := range i.all() {
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
	}
	return nil
}

// answers reports whether obj is one a fleet's actions act on and wait for: its members, their
// workload and disks, the nodes they run on. Its change moves a fleet in motion on to its next
// step; the fleet itself, its reservation and the classes it names are news of another kind.
func answers(obj any) bool {
	switch obj.(type) {
	case *appsv1.StatefulSet, *appsv1.Deployment, *corev1.Pod, *corev1.PersistentVolumeClaim, *corev1.Node:
		return true
	}
	return false
}

// changed tells a real update from a relist or resync of the same version. Node updates count
// only when the node's health changed: kubelets rewrite node status on their own schedule, and
// a member's node matters to healing alone.
func changed(oldObj, newObj any) bool {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	if !ok1 || !ok2 {
		return true
	}
	if o.GetResourceVersion() == n.GetResourceVersion() {
		return false
	}
	if on, ok := oldObj.(*corev1.Node); ok {
		if nn, ok := newObj.(*corev1.Node); ok {
			return nodeHealthChanged(on, nn)
		}
	}
	return true
}

func nodeHealthChanged(a, b *corev1.Node) bool {
	ready := func(n *corev1.Node) corev1.NodeCondition {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return corev1.NodeCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}
			}
		}
		return corev1.NodeCondition{}
	}
	ra, rb := ready(a), ready(b)
	if ra.Status != rb.Status || !ra.LastTransitionTime.Equal(&rb.LastTransitionTime) {
		return true
	}
	return !slices.EqualFunc(a.Spec.Taints, b.Spec.Taints, func(x, y corev1.Taint) bool {
		return x.Key == y.Key && x.Value == y.Value && x.Effect == y.Effect && x.TimeAdded.Equal(y.TimeAdded)
	})
}

// FleetKeys maps an object to the keys of the fleets it matters to.
func (i *Informers) FleetKeys(obj any) []events.FleetKey {
	switch o := obj.(type) {
	case *v1alpha1.CelldFleet:
		// Every fleet that names the bucket: one going away, or getting its finalizer, changes
		// which of them may bind a bucket no reservation holds.
		keys := i.indexedFleets(events.IndexBucket, reservation.IdentityOf(o.Spec.Bucket).Name)
		if !slices.Contains(keys, events.KeyOf(o)) {
			keys = append(keys, events.KeyOf(o))
		}
		return keys
	case *v1alpha1.CelldReservation:
		// Every fleet that names the bucket: the one it binds, and any it refuses.
		return i.indexedFleets(events.IndexBucket, reservation.IdentityOf(o.Spec.Bucket).Name)
	case *appsv1.StatefulSet, *appsv1.Deployment:
		m := o.(metav1.Object)
		if k := ownerFleet(m); len(k) > 0 {
			return k
		}
		// A workload of a fleet's name that the fleet does not own holds that fleet (NameTaken):
		// its deletion or change must wake the fleet, which no reference points to.
		if _, err := i.fleetLister.CelldFleets(m.GetNamespace()).Get(m.GetName()); err == nil {
			return []events.FleetKey{events.KeyOf(m)}
		}
		return nil
	case *corev1.Pod:
		return instanceFleet(o)
	case *corev1.PersistentVolumeClaim:
		// A claim under a fleet's claim name holds that fleet whatever its labels (ForeignDisks).
		keys := instanceFleet(o)
		if fleet, _, ok := kinds.ClaimFleet(o.Name); ok {
			keys = i.addExisting(keys, o.Namespace, fleet)
		}
		return keys
	case *corev1.Node:
		return i.fleetsOnNode(o.Name)
	case *storagev1.StorageClass:
		return i.indexedFleets(events.IndexStorageClass, o.Name)
	case *schedulingv1.PriorityClass:
		return i.indexedFleets(events.IndexPriorityClass, o.Name)
	case *metav1.PartialObjectMetadata:
		return i.indexedFleets(events.IndexServiceAccount, o.Namespace+"/"+o.Name)
	case metav1.Object:
		keys := ownerFleet(o)
		if len(keys) == 0 {
			keys = instanceFleet(o)
		}
		// An object under a fleet's derived name holds that fleet whatever its owner or labels
		// (NameTaken): its change or deletion must wake the fleet.
		keys = i.addExisting(keys, o.GetNamespace(), o.GetName())
		for _, suffix := range kinds.DerivedSuffixes {
			if fleet, ok := strings.CutSuffix(o.GetName(), suffix); ok {
				keys = i.addExisting(keys, o.GetNamespace(), fleet)
			}
		}
		return keys
	}
	return nil
}

// addExisting adds the key of fleet namespace/name to keys when that fleet exists.
func (i *Informers) addExisting(keys []events.FleetKey, namespace, name string) []events.FleetKey {
	k := events.FleetKey{Namespace: namespace, Name: name}
	if slices.Contains(keys, k) {
		return keys
	}
	if _, err := i.fleetLister.CelldFleets(namespace).Get(name); err != nil {
		return keys
	}
	return append(keys, k)
}

// ownerFleet is the fleet that controls obj, by its controller reference.
func ownerFleet(obj metav1.Object) []events.FleetKey {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "CelldFleet" || ref.APIVersion != v1alpha1.SchemeGroupVersion.String() {
		return nil
	}
	return []events.FleetKey{{Namespace: obj.GetNamespace(), Name: ref.Name}}
}

// instanceFleet is the fleet named by obj's instance label. Pods and claims carry no reference to
// the fleet (their owner is the workload, or nothing), but carry the label from the template.
func instanceFleet(obj metav1.Object) []events.FleetKey {
	if name := obj.GetLabels()[kinds.LabelInstance]; name != "" {
		return []events.FleetKey{{Namespace: obj.GetNamespace(), Name: name}}
	}
	return nil
}

func (i *Informers) indexedFleets(index, value string) []events.FleetKey {
	objs, err := i.Fleets.GetIndexer().ByIndex(index, value)
	if err != nil {
		return nil
	}
	keys := make([]events.FleetKey, 0, len(objs))
	for _, o := range objs {
		if f, ok := o.(*v1alpha1.CelldFleet); ok {
			keys = append(keys, events.KeyOf(f))
		}
	}
	return keys
}

// fleetsOnNode are the fleets with a member on the node, found through the Pod cache's node
// index: a node going away matters only to the fleets it ran members of.
func (i *Informers) fleetsOnNode(node string) []events.FleetKey {
	objs, err := i.Pods.GetIndexer().ByIndex(events.IndexNode, node)
	if err != nil {
		return nil
	}
	var keys []events.FleetKey
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			for _, k := range instanceFleet(p) {
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
	}
	return keys
}
