package kube

import (
	"fmt"
	"slices"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
	"github.com/celld/celld-operator/reservation"
)

// Observe gathers what the caches hold about one fleet, the way events.Store.Observe does for the
// simulator. The objects are the caches' own: nothing downstream may modify them.
func (i *Informers) Observe(key events.FleetKey, now time.Time, util *events.Utilization) (*events.Observation, error) {
	namespace, name := key.Namespace, key.Name
	o := &events.Observation{Now: now, Nodes: map[string]*corev1.Node{}, NodesSynced: i.Nodes.HasSynced(), Utilization: util}
	f, err := i.fleetLister.CelldFleets(namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return o, nil
	case err != nil:
		return nil, fmt.Errorf("get fleet %s/%s: %w", namespace, name, err)
	}
	o.Fleet = f

	for _, r := range indexed[*v1alpha1.CelldReservation](i.Reservations.GetIndexer().ByIndex(byBucket, reservation.IdentityOf(f.Spec.Bucket).Name)) {
		if madeByOperator(r) {
			o.Reservations = append(o.Reservations, r)
		}
	}
	// A reservation under the name the fleet would create that the operator did not make: the
	// fleet's own cannot be created, and this one is never trusted nor written to.
	rname := render.ReservationName(f.Spec.Bucket)
	if obj, ok, err := i.Reservations.GetIndexer().GetByKey(namespace + "/" + rname); err == nil && ok {
		if r, isRes := obj.(*v1alpha1.CelldReservation); isRes && !madeByOperator(r) {
			o.Unowned = append(o.Unowned, "CelldReservation/"+rname)
		}
	}
	// Only the fleets this operator watches: with --namespace, a rival in another namespace is
	// unseen, and the reservation alone keeps the bucket.
	for _, r := range indexed[*v1alpha1.CelldFleet](i.Fleets.GetIndexer().ByIndex(byBucket, reservation.IdentityOf(f.Spec.Bucket).Name)) {
		if r.UID != f.UID {
			o.Rivals = append(o.Rivals, r)
		}
	}
	// The objects under the fleet's derived names, looked up by name whatever their labels: ours
	// only when the fleet controls them, anything else is someone else's and never written to.
	derived := func(inf cache.SharedIndexInformer, kind, name string) metav1.Object {
		obj, ok, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
		if err != nil || !ok {
			return nil
		}
		m, isMeta := obj.(metav1.Object)
		if !isMeta {
			return nil
		}
		if !events.ControlledBy(m, f.UID) {
			o.Unowned = append(o.Unowned, kind+"/"+name)
			return nil
		}
		return m
	}
	if s := derived(i.StatefulSets, "StatefulSet", name); s != nil {
		o.StatefulSet = s.(*appsv1.StatefulSet)
	}
	if d := derived(i.Deployments, "Deployment", name); d != nil {
		o.Deployment = d.(*appsv1.Deployment)
	}
	for _, d := range events.DerivedObjects(f) {
		inf := i.owned[kinds.Kind(d.Kind)]
		if inf == nil {
			continue // a workload kind, looked up above
		}
		if obj := derived(inf, d.Kind, d.Name); obj != nil {
			o.Owned = append(o.Owned, obj.(kinds.Object))
		}
	}
	for _, p := range indexed[*corev1.Pod](i.Pods.GetIndexer().ByIndex(byFleetUID, string(f.UID))) {
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
		if n, err := i.nodeLister.Get(p.Spec.NodeName); err == nil {
			o.Nodes[n.Name] = n
		}
	}
	// The claims labelled for the fleet, and those named as its StatefulSet names its claims
	// whatever their labels: an unlabelled one would otherwise be adopted by the StatefulSet
	// unseen.
	o.PVCs = indexed[*corev1.PersistentVolumeClaim](i.PVCs.GetIndexer().ByIndex(byInstance, key.String()))
	for _, c := range indexed[*corev1.PersistentVolumeClaim](i.PVCs.GetIndexer().ByIndex(byClaimName, key.String())) {
		if !slices.ContainsFunc(o.PVCs, func(x *corev1.PersistentVolumeClaim) bool { return x.UID == c.UID }) {
			o.PVCs = append(o.PVCs, c)
		}
	}
	sort.Slice(o.PVCs, func(a, b int) bool { return o.PVCs[a].Name < o.PVCs[b].Name })
	if f.Spec.Storage != nil {
		o.StorageClassKnown = i.StorageClasses.HasSynced()
		if sc, err := i.classLister.Get(f.Spec.Storage.StorageClassName); err == nil {
			o.StorageClass = sc
		}
	}
	o.ServiceAccountMissing = i.serviceAccountMissing(f)
	o.PriorityClassMissing = i.priorityClassMissing(f)
	return o, nil
}

// priorityClassMissing is true only when the PriorityClass cache synced and lacks the class the
// fleet names: not knowing is not missing.
func (i *Informers) priorityClassMissing(f *v1alpha1.CelldFleet) bool {
	name := f.Spec.Pod.PriorityClassName
	if name == "" || !i.PriorityClasses.HasSynced() {
		return false
	}
	_, err := i.prioLister.Get(name)
	return apierrors.IsNotFound(err)
}

// serviceAccountMissing is true only when the ServiceAccount cache synced and lacks the account
// the fleet names: not knowing is not missing.
func (i *Informers) serviceAccountMissing(f *v1alpha1.CelldFleet) bool {
	if f.Spec.ServiceAccountName == "" || i.ServiceAccounts == nil || !i.ServiceAccounts.HasSynced() {
		return false
	}
	_, exists, err := i.ServiceAccounts.GetIndexer().GetByKey(f.Namespace + "/" + f.Spec.ServiceAccountName)
	return err == nil && !exists
}

// indexed keeps the objects of type T from an index lookup, sorted by namespace/name so the same
// caches always give the same observation.
func indexed[T metav1.Object](objs []any, err error) []T {
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
