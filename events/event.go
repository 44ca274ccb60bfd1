package events

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// Kind names what an event says happened.
type Kind string

// The normalized events.
const (
	FleetObserved          Kind = "FleetObserved"
	FleetDeletionRequested Kind = "FleetDeletionRequested"
	FleetGone              Kind = "FleetGone"
	WorkloadObserved       Kind = "WorkloadObserved"
	WorkloadGone           Kind = "WorkloadGone"
	MemberObserved         Kind = "MemberObserved"
	MemberGone             Kind = "MemberGone"
	NodeObserved           Kind = "NodeObserved"
	NodeGone               Kind = "NodeGone"
	DiskObserved           Kind = "DiskObserved"
	DiskGone               Kind = "DiskGone"
	ReservationObserved    Kind = "ReservationObserved"
	ReservationGone        Kind = "ReservationGone"
	OwnedObserved          Kind = "OwnedObserved"
	OwnedGone              Kind = "OwnedGone"
	StorageClassObserved   Kind = "StorageClassObserved"
	StorageClassGone       Kind = "StorageClassGone"
	UtilizationObserved    Kind = "UtilizationObserved"
	TimePassed             Kind = "TimePassed"
)

// Event is one normalized observation. Object is the typed Kubernetes object (its last known
// state for a Gone event); Time is when it was observed and is the machine's only clock.
type Event struct {
	Kind        Kind
	Time        time.Time
	Object      any
	Utilization *Utilization
	// Fleet is the namespace/name of the fleet a Utilization event is about.
	Fleet string
}

// Observe turns an object seen by an informer (or the simulator) into its event. gone is true
// when the object was deleted.
func Observe(obj any, gone bool, now time.Time) (Event, error) {
	ev := Event{Time: now, Object: obj}
	pick := func(seen, deleted Kind) Kind {
		if gone {
			return deleted
		}
		return seen
	}
	switch o := obj.(type) {
	case *v1alpha1.CelldFleet:
		ev.Kind = pick(FleetObserved, FleetGone)
		if !gone && o.DeletionTimestamp != nil {
			ev.Kind = FleetDeletionRequested
		}
	case *v1alpha1.CelldReservation:
		ev.Kind = pick(ReservationObserved, ReservationGone)
	case *appsv1.StatefulSet, *appsv1.Deployment:
		ev.Kind = pick(WorkloadObserved, WorkloadGone)
	case *corev1.Pod:
		ev.Kind = pick(MemberObserved, MemberGone)
	case *corev1.Node:
		ev.Kind = pick(NodeObserved, NodeGone)
	case *corev1.PersistentVolumeClaim:
		ev.Kind = pick(DiskObserved, DiskGone)
	case *corev1.Service, *networkingv1.NetworkPolicy, *policyv1.PodDisruptionBudget:
		ev.Kind = pick(OwnedObserved, OwnedGone)
	case *storagev1.StorageClass:
		ev.Kind = pick(StorageClassObserved, StorageClassGone)
	default:
		return Event{}, fmt.Errorf("observe: no event for object of type %T", obj)
	}
	return ev, nil
}

// Passed is the event that only moves time on.
func Passed(now time.Time) Event { return Event{Kind: TimePassed, Time: now} }
