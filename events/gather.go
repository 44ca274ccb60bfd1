package events

import (
	"fmt"
	"slices"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/reservation"
)

// ServiceAccounts names the cache of ServiceAccounts, which only tells whether one exists: not a
// kind of kinds.Table, as the operator neither writes nor owns them.
const ServiceAccounts kinds.Kind = "ServiceAccount"

// Caches are what Gather reads: the operator's informer caches, or the simulator's store, each
// kind's cache keyed by namespace/name (name alone for cluster-wide kinds) and carrying the
// indexes of Indexers. The objects are the caches' own: nothing may modify them.
type Caches interface {
	// Cache is the cache of one kind; nil when the kind is not watched.
	Cache(kind kinds.Kind) Index
	// Synced reports whether the cache of a kind holds every object of it: until then, an
	// object missing from it says nothing.
	Synced(kind kinds.Kind) bool
}

// Index is one kind's cache as Gather reads it; client-go's cache.Indexer is one.
type Index interface {
	GetByKey(key string) (item any, exists bool, err error)
	ByIndex(indexName, indexedValue string) ([]any, error)
}

// Gather collects what the caches hold about one fleet: the one observation the operator decides
// on and the property tests run, over the informers' caches in the first and the simulator's
// store in the second.
func Gather(c Caches, key FleetKey, now time.Time, util *Utilization) (*Observation, error) {
	namespace, name := key.Namespace, key.Name
	o := &Observation{Now: now, Nodes: map[string]*corev1.Node{}, NodesSynced: c.Synced(kinds.Node), Utilization: util}
	obj, ok, err := get(c, kinds.Fleet, key.String())
	if err != nil {
		return nil, fmt.Errorf("get fleet %s: %w", key, err)
	}
	f, isFleet := obj.(*v1alpha1.CelldFleet)
	if !ok || !isFleet {
		return o, nil
	}
	o.Fleet = f
	id := reservation.IdentityOf(f.Spec.Bucket)
	for _, r := range indexed[*v1alpha1.CelldReservation](c, kinds.Reservation, IndexBucket, id.Name) {
		if reservation.SameBucket(r.Spec.Bucket, f.Spec.Bucket) && kinds.MadeByOperator(r) {
			o.Reservations = append(o.Reservations, r)
		}
	}
	// A reservation under the name the fleet would create that the operator did not make: the
	// fleet's own cannot be created, and this one is never trusted nor written to.
	rname := reservation.Name(id)
	if obj, ok, err := get(c, kinds.Reservation, namespace+"/"+rname); err == nil && ok {
		if r, isRes := obj.(*v1alpha1.CelldReservation); isRes && !kinds.MadeByOperator(r) {
			o.Unowned = append(o.Unowned, "CelldReservation/"+rname)
		}
	}
	// Only the fleets the caches hold: with --namespace, a rival in another namespace is
	// unseen, and the reservation alone keeps the bucket.
	for _, r := range indexed[*v1alpha1.CelldFleet](c, kinds.Fleet, IndexBucket, id.Name) {
		if r.UID != f.UID && reservation.SameBucket(r.Spec.Bucket, f.Spec.Bucket) {
			o.Rivals = append(o.Rivals, r)
		}
	}
	// The objects under the fleet's derived names, looked up by name whatever their labels: ours
	// only when the fleet controls them, anything else is someone else's and never written to.
	derived := func(kind kinds.Kind, name string) metav1.Object {
		obj, ok, err := get(c, kind, namespace+"/"+name)
		if err != nil || !ok {
			return nil
		}
		m, isMeta := obj.(metav1.Object)
		if !isMeta {
			return nil
		}
		if !kinds.ControlledBy(m, f.UID) {
			o.Unowned = append(o.Unowned, string(kind)+"/"+name)
			return nil
		}
		return m
	}
	if s, ok := derived(kinds.StatefulSet, name).(*appsv1.StatefulSet); ok {
		o.StatefulSet = s
	}
	if d, ok := derived(kinds.Deployment, name).(*appsv1.Deployment); ok {
		o.Deployment = d
	}
	for _, d := range kinds.DerivedObjects(f) {
		if kinds.IsWorkloadKind(kinds.Kind(d.Kind)) {
			continue // looked up above, whichever the fleet uses
		}
		if obj, ok := derived(kinds.Kind(d.Kind), d.Name).(kinds.Object); ok {
			o.Owned = append(o.Owned, obj)
		}
	}
	for _, p := range indexed[*corev1.Pod](c, kinds.Pod, IndexFleetUID, string(f.UID)) {
		if p.Namespace == namespace {
			o.Pods = append(o.Pods, p)
		}
	}
	// Only the members' nodes: the machine looks nodes up by a member's node name, and a node
	// missing from a synced cache is gone. Copying every node would cost O(nodes) per sync.
	for _, p := range o.Pods {
		if p.Spec.NodeName == "" {
			continue
		}
		if obj, ok, err := get(c, kinds.Node, p.Spec.NodeName); err == nil && ok {
			if n, isNode := obj.(*corev1.Node); isNode {
				o.Nodes[n.Name] = n
			}
		}
	}
	// The claims labelled for the fleet, and those named as its StatefulSet names its claims
	// whatever their labels: an unlabelled one would otherwise be adopted by the StatefulSet
	// unseen.
	o.PVCs = indexed[*corev1.PersistentVolumeClaim](c, kinds.PersistentVolumeClaim, IndexInstance, key.String())
	for _, claim := range indexed[*corev1.PersistentVolumeClaim](c, kinds.PersistentVolumeClaim, IndexClaimName, key.String()) {
		if !slices.ContainsFunc(o.PVCs, func(x *corev1.PersistentVolumeClaim) bool { return x.UID == claim.UID }) {
			o.PVCs = append(o.PVCs, claim)
		}
	}
	sort.Slice(o.PVCs, func(a, b int) bool { return o.PVCs[a].Name < o.PVCs[b].Name })
	if f.Spec.Storage != nil {
		o.StorageClassKnown = c.Synced(kinds.StorageClass)
		if obj, ok, err := get(c, kinds.StorageClass, f.Spec.Storage.StorageClassName); err == nil && ok {
			o.StorageClass, _ = obj.(*storagev1.StorageClass)
		}
	}
	o.ServiceAccountMissing = f.Spec.ServiceAccountName != "" && missing(c, ServiceAccounts, namespace+"/"+f.Spec.ServiceAccountName)
	o.PriorityClassMissing = f.Spec.Pod.PriorityClassName != "" && missing(c, kinds.PriorityClass, f.Spec.Pod.PriorityClassName)
	return o, nil
}

// missing is true only when the cache of kind synced and lacks key: not knowing is not missing.
func missing(c Caches, kind kinds.Kind, key string) bool {
	if c.Cache(kind) == nil || !c.Synced(kind) {
		return false
	}
	_, ok, err := get(c, kind, key)
	return err == nil && !ok
}

// get looks an object up by its cache key; not found when the kind is not watched.
func get(c Caches, kind kinds.Kind, key string) (any, bool, error) {
	idx := c.Cache(kind)
	if idx == nil {
		return nil, false, nil
	}
	return idx.GetByKey(key)
}

// indexed is the objects of type T the cache of kind holds under value in an index.
func indexed[T metav1.Object](c Caches, kind kinds.Kind, index, value string) []T {
	return ByIndex[T](c.Cache(kind), index, value)
}

// ByIndex is the objects of type T a cache holds under value in an index, sorted by
// namespace/name so that the same caches always give the same observation; none from a nil cache.
func ByIndex[T metav1.Object](idx Index, index, value string) []T {
	if idx == nil {
		return nil
	}
	objs, err := idx.ByIndex(index, value)
	if err != nil {
		return nil
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].GetNamespace() != out[b].GetNamespace() {
			return out[a].GetNamespace() < out[b].GetNamespace()
		}
		return out[a].GetName() < out[b].GetName()
	})
	return out
}
