// Package events turns what the operator observes of Kubernetes into what the lifecycle machine
// consumes: the Observation of one fleet gathered from caches (the operator's informers, or the
// simulator's store) through the indexes both carry, and the normalized View the machine decides
// on, with its fingerprint.
//
// Nothing here does I/O or reads a clock: time arrives with the observation.
package events

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// Observation is everything observed about one fleet at one moment: the raw, typed objects as the
// caches hold them. It is what both the operator (from its informers) and the simulator (from its
// in-memory cluster) hand to Normalize. Objects are shared with the caches and never modified.
type Observation struct {
	// Now is the time of the latest event folded into this observation.
	Now time.Time
	// Fleet is nil when the fleet no longer exists.
	Fleet *v1alpha1.CelldFleet
	// Reservations are every reservation of the fleet's bucket, whichever fleet they bind.
	Reservations []*v1alpha1.CelldReservation
	// Rivals are the other fleets the operator sees that name the fleet's bucket: while no
	// reservation binds it, they decide who may bind it.
	Rivals      []*v1alpha1.CelldFleet
	StatefulSet *appsv1.StatefulSet
	Deployment  *appsv1.Deployment
	// Owned are the fleet's objects of the owned kinds that are not workloads: those under the
	// fleet's derived names (DerivedObjects) that the fleet controls, in that order.
	Owned []kinds.Object
	// Pods are the Pods that carry the fleet's UID label.
	Pods []*corev1.Pod
	// PVCs are the claims that carry the fleet's name label, whatever UID they carry, and the
	// claims named as the fleet's StatefulSet names its claims, whatever labels they carry.
	PVCs []*corev1.PersistentVolumeClaim
	// Nodes are the nodes of the fleet's members, by name; a member's node missing here is gone.
	Nodes map[string]*corev1.Node
	// NodesSynced is false until the node cache has synced: a missing node then says nothing.
	NodesSynced bool
	// StorageClass is the fleet's storage class, nil when it does not exist (PersistentFleet).
	StorageClass *storagev1.StorageClass
	// StorageClassKnown is false when the operator cannot tell whether the class exists.
	StorageClassKnown bool
	// ServiceAccountMissing is true when the fleet names a ServiceAccount that does not exist.
	ServiceAccountMissing bool
	// PriorityClassMissing is true when spec.pod names a PriorityClass that does not exist.
	PriorityClassMissing bool
	// Unowned names (Kind/name: "Service/a-peers", "StatefulSet/a") the objects under the fleet's
	// derived names (DerivedObjects, both workload kinds) that exist and are not controlled by the
	// fleet, and a reservation under the name the fleet would create that the operator did not
	// make: applying over them would take them over.
	Unowned []string
	// Uninstalling is true when the fleets' CustomResourceDefinition is being deleted, or is gone:
	// a fleet deleted then goes with its CRD, not by a person's request.
	Uninstalling bool
	// Utilization is the latest observed usage, nil when none was observed.
	Utilization *Utilization
	// Refused is the API server's refusal of an object rendered from the fleet's spec, nil when
	// none was seen. Only the driver sees it (as the answer to a write): it reports it back here.
	Refused *Refusal
}

// Refusal is the API server refusing an object rendered from one generation of a fleet's spec.
type Refusal struct {
	Generation int64
	Object     string
	Message    string
}

// Utilization is the fleet members' observed usage against their requests.
type Utilization struct {
	// Time the metrics were sampled.
	Time time.Time
	// Percent is celld's mean CPU usage in percent of its request over the members (sidecars left out).
	Percent int32
	// Members is how many members the sample covers.
	Members int32
	// Unavailable is true when nothing was observed: the cluster serves no metrics API, the API
	// does not answer, or it has no usage for the members.
	Unavailable bool
	// Why says what was not observed, for the CapacityObserved condition; empty when the
	// cluster serves no metrics API at all.
	Why string
}
