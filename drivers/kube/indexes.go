package kube

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/reservation"
)

// Cache indexes: how a sync finds a fleet's objects without scanning a cache, and how a handler
// finds the fleets an object matters to.
const (
	// byBucket: fleets and reservations by the canonical name of spec.bucket; a sync then compares
	// whole identities.
	byBucket = "bucket"
	// byStorageClass: fleets by spec.storage.storageClassName.
	byStorageClass = "storageClass"
	// byPriorityClass: fleets by spec.pod.priorityClassName.
	byPriorityClass = "priorityClass"
	// byServiceAccount: fleets by namespace/spec.serviceAccountName.
	byServiceAccount = "serviceAccount"
	// byFleetUID: Pods by their celld.io/fleet-uid label.
	byFleetUID = "fleetUID"
	// byNode: Pods by spec.nodeName.
	byNode = "node"
	// byInstance: claims by namespace/app.kubernetes.io/instance.
	byInstance = "instance"
	// byClaimName: claims by namespace/fleet, for the claims named as a fleet's StatefulSet
	// names them (events.ClaimName), whatever their labels.
	byClaimName = "claimName"
)

func (i *Informers) addIndexers() {
	must(i.Fleets.AddIndexers(cache.Indexers{
		byBucket: func(obj any) ([]string, error) {
			if f, ok := obj.(*v1alpha1.CelldFleet); ok {
				return []string{reservation.IdentityOf(f.Spec.Bucket).Name}, nil
			}
			return nil, nil
		},
		byStorageClass: func(obj any) ([]string, error) {
			if f, ok := obj.(*v1alpha1.CelldFleet); ok && f.Spec.Storage != nil {
				return []string{f.Spec.Storage.StorageClassName}, nil
			}
			return nil, nil
		},
		byPriorityClass: func(obj any) ([]string, error) {
			if f, ok := obj.(*v1alpha1.CelldFleet); ok && f.Spec.Pod.PriorityClassName != "" {
				return []string{f.Spec.Pod.PriorityClassName}, nil
			}
			return nil, nil
		},
		byServiceAccount: func(obj any) ([]string, error) {
			if f, ok := obj.(*v1alpha1.CelldFleet); ok && f.Spec.ServiceAccountName != "" {
				return []string{f.Namespace + "/" + f.Spec.ServiceAccountName}, nil
			}
			return nil, nil
		},
	}))
	must(i.Reservations.AddIndexers(cache.Indexers{
		byBucket: func(obj any) ([]string, error) {
			if r, ok := obj.(*v1alpha1.CelldReservation); ok {
				return []string{reservation.IdentityOf(r.Spec.Bucket).Name}, nil
			}
			return nil, nil
		},
	}))
	must(i.Pods.AddIndexers(cache.Indexers{
		byFleetUID: labelIndex(events.LabelFleetUID),
		byNode: func(obj any) ([]string, error) {
			if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
				return []string{p.Spec.NodeName}, nil
			}
			return nil, nil
		},
	}))
	must(i.PVCs.AddIndexers(cache.Indexers{
		byInstance: func(obj any) ([]string, error) {
			if m, ok := obj.(metav1.Object); ok && m.GetLabels()[events.LabelInstance] != "" {
				return []string{events.FleetKey{Namespace: m.GetNamespace(), Name: m.GetLabels()[events.LabelInstance]}.String()}, nil
			}
			return nil, nil
		},
		byClaimName: func(obj any) ([]string, error) {
			if m, ok := obj.(metav1.Object); ok {
				if fleet, _, named := events.ClaimFleet(m.GetName()); named {
					return []string{events.FleetKey{Namespace: m.GetNamespace(), Name: fleet}.String()}, nil
				}
			}
			return nil, nil
		},
	}))
}

func labelIndex(label string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		if m, ok := obj.(metav1.Object); ok && m.GetLabels()[label] != "" {
			return []string{m.GetLabels()[label]}, nil
		}
		return nil, nil
	}
}
