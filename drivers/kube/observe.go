package kube

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/bucket"
	"github.com/celld/celld-operator/events"
)

// Observe gathers what the caches hold about one fleet, the way events.Store.Observe does for the
// simulator. The objects are the caches' own: nothing downstream may modify them.
func (i *Informers) Observe(namespace, name string, now time.Time, util *events.Utilization) (*events.Observation, error) {
	o := &events.Observation{Now: now, Nodes: map[string]*corev1.Node{}, NodesSynced: i.Nodes.HasSynced(), Utilization: util}
	f, err := i.fleetLister.CelldFleets(namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return o, nil
	case err != nil:
		return nil, fmt.Errorf("get fleet %s/%s: %w", namespace, name, err)
	}
	o.Fleet = f

	o.Reservations = indexed[*v1alpha1.CelldReservation](i.Reservations.GetIndexer().ByIndex(byBucket, bucket.Of(f.Spec.Bucket).Name))
	// Only the fleets this operator watches: with --namespace, a rival in another namespace is
	// unseen, and the reservation alone keeps the bucket.
	for _, r := range indexed[*v1alpha1.CelldFleet](i.Fleets.GetIndexer().ByIndex(byBucket, bucket.Of(f.Spec.Bucket).Name)) {
		if r.UID != f.UID {
			o.Rivals = append(o.Rivals, r)
		}
	}
	if s, err := i.stsLister.StatefulSets(namespace).Get(name); err == nil {
		if ownedBy(s, f.UID) {
			o.StatefulSet = s
		} else {
			o.Unowned = append(o.Unowned, "StatefulSet/"+name)
		}
	}
	if d, err := i.deployLister.Deployments(namespace).Get(name); err == nil {
		if ownedBy(d, f.UID) {
			o.Deployment = d
		} else {
			o.Unowned = append(o.Unowned, "Deployment/"+name)
		}
	}
	o.Services = indexed[*corev1.Service](i.Services.GetIndexer().ByIndex(byOwner, string(f.UID)))
	o.Policies = indexed[*networkingv1.NetworkPolicy](i.Policies.GetIndexer().ByIndex(byOwner, string(f.UID)))
	if pdbs := indexed[*policyv1.PodDisruptionBudget](i.PDBs.GetIndexer().ByIndex(byOwner, string(f.UID))); len(pdbs) > 0 {
		o.PDB = pdbs[0]
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
	o.PVCs = indexed[*corev1.PersistentVolumeClaim](i.PVCs.GetIndexer().ByIndex(byInstance, namespace+"/"+name))
	if f.Spec.Storage != nil {
		o.StorageClassKnown = i.StorageClasses.HasSynced()
		if sc, err := i.classLister.Get(f.Spec.Storage.StorageClassName); err == nil {
			o.StorageClass = sc
		}
	}
	o.ServiceAccountMissing = i.serviceAccountMissing(f)
	return o, nil
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

func ownedBy(obj metav1.Object, uid types.UID) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == uid {
			return true
		}
	}
	return false
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
