package events

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/reservation"
)

// Cache indexes: how Gather finds a fleet's objects without scanning a cache, and how the
// operator's handlers find the fleets an object matters to. The operator's informers and the
// simulator's store carry the same ones (Indexers), so an observation reads both alike.
const (
	// IndexBucket: fleets and reservations by the canonical name of spec.bucket; Gather then
	// compares whole identities.
	IndexBucket = "bucket"
	// IndexStorageClass: fleets by spec.storage.storageClassName.
	IndexStorageClass = "storageClass"
	// IndexPriorityClass: fleets by spec.pod.priorityClassName.
	IndexPriorityClass = "priorityClass"
	// IndexServiceAccount: fleets by namespace/spec.serviceAccountName.
	IndexServiceAccount = "serviceAccount"
	// IndexFleetUID: Pods by their celld.io/fleet-uid label.
	IndexFleetUID = "fleetUID"
	// IndexNode: Pods by spec.nodeName.
	IndexNode = "node"
	// IndexInstance: claims by namespace/app.kubernetes.io/instance.
	IndexInstance = "instance"
	// IndexClaimName: claims by namespace/fleet, for the claims named as a fleet's StatefulSet
	// names them (kinds.ClaimName), whatever their labels.
	IndexClaimName = "claimName"
)

// IndexFunc gives the values an object is indexed under: client-go's cache.IndexFunc, kept here
// so that the core links no client-go.
type IndexFunc = func(obj any) ([]string, error)

// Indexers are the indexes the cache of a kind carries, by name; none for most kinds.
func Indexers(kind kinds.Kind) map[string]IndexFunc {
	switch kind {
	case kinds.Fleet:
		return map[string]IndexFunc{
			IndexBucket: func(obj any) ([]string, error) {
				if f, ok := obj.(*v1alpha1.CelldFleet); ok {
					return []string{reservation.IdentityOf(f.Spec.Bucket).Name}, nil
				}
				return nil, nil
			},
			IndexStorageClass: fleetIndex(func(f *v1alpha1.CelldFleet) string {
				if f.Spec.Storage == nil {
					return ""
				}
				return f.Spec.Storage.StorageClassName
			}),
			IndexPriorityClass: fleetIndex(func(f *v1alpha1.CelldFleet) string { return f.Spec.Pod.PriorityClassName }),
			IndexServiceAccount: fleetIndex(func(f *v1alpha1.CelldFleet) string {
				if f.Spec.ServiceAccountName == "" {
					return ""
				}
				return f.Namespace + "/" + f.Spec.ServiceAccountName
			}),
		}
	case kinds.Reservation:
		return map[string]IndexFunc{IndexBucket: func(obj any) ([]string, error) {
			if r, ok := obj.(*v1alpha1.CelldReservation); ok {
				return []string{reservation.IdentityOf(r.Spec.Bucket).Name}, nil
			}
			return nil, nil
		}}
	case kinds.Pod:
		return map[string]IndexFunc{
			IndexFleetUID: func(obj any) ([]string, error) {
				if m, ok := obj.(metav1.Object); ok && m.GetLabels()[kinds.LabelFleetUID] != "" {
					return []string{m.GetLabels()[kinds.LabelFleetUID]}, nil
				}
				return nil, nil
			},
			IndexNode: func(obj any) ([]string, error) {
				if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
					return []string{p.Spec.NodeName}, nil
				}
				return nil, nil
			},
		}
	case kinds.PersistentVolumeClaim:
		return map[string]IndexFunc{
			IndexInstance: func(obj any) ([]string, error) {
				if m, ok := obj.(metav1.Object); ok && m.GetLabels()[kinds.LabelInstance] != "" {
					return []string{FleetKey{Namespace: m.GetNamespace(), Name: m.GetLabels()[kinds.LabelInstance]}.String()}, nil
				}
				return nil, nil
			},
			IndexClaimName: func(obj any) ([]string, error) {
				if m, ok := obj.(metav1.Object); ok {
					if fleet, _, named := kinds.ClaimFleet(m.GetName()); named {
						return []string{FleetKey{Namespace: m.GetNamespace(), Name: fleet}.String()}, nil
					}
				}
				return nil, nil
			},
		}
	}
	return map[string]IndexFunc{}
}

// fleetIndex indexes fleets by one value of theirs, none when it is empty.
func fleetIndex(value func(*v1alpha1.CelldFleet) string) IndexFunc {
	return func(obj any) ([]string, error) {
		if f, ok := obj.(*v1alpha1.CelldFleet); ok {
			if v := value(f); v != "" {
				return []string{v}, nil
			}
		}
		return nil, nil
	}
}
