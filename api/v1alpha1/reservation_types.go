package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// CelldReservation is a fleet's permanent storage reservation. It binds a bucket to one fleet UID,
// is created before any workload, carries no owner reference and outlives the fleet: the bucket
// stays refused to every other fleet until a person deletes the reservation.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=cres,categories=celld
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Fleet",type=string,JSONPath=`.spec.fleetName`
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.spec.bucket.name`
// +kubebuilder:printcolumn:name="Profile",type=string,JSONPath=`.spec.profile`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CelldReservation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec binds the bucket to one fleet. Immutable.
	Spec CelldReservationSpec `json:"spec"`
	// status holds the capacity-policy history, and nothing else.
	// +optional
	Status CelldReservationStatus `json:"status,omitempty"`
}

// CelldReservationSpec binds a bucket to one fleet UID.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec of a CelldReservation is immutable: delete the reservation to release the bucket"
type CelldReservationSpec struct {
	// fleetName is the name of the fleet the bucket is reserved to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	FleetName string `json:"fleetName"`
	// fleetUID is the UID of the fleet the bucket is reserved to.
	FleetUID types.UID `json:"fleetUID"`
	// profile of that fleet.
	Profile Profile `json:"profile"`
	// bucket reserved.
	Bucket BucketSpec `json:"bucket"`
}

// CelldReservationStatus holds the capacity-policy history. Clearing it authorizes nothing: with
// an empty history the policy is at least as conservative as with the full one.
type CelldReservationStatus struct {
	// capacityHistory lists the latest capacity decisions, oldest first, bounded in length.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	CapacityHistory []CapacityDecision `json:"capacityHistory,omitempty"`
}

// DecisionKind is what a capacity decision did.
// +kubebuilder:validation:Enum=Grow;ScaleInRequested;ShrinkOne;ScaleInWithdrawn
type DecisionKind string

const (
	// DecisionGrow: the size went up to the target in one step.
	DecisionGrow DecisionKind = "Grow"
	// DecisionScaleInRequested: a target below the size was first seen; stabilization starts here.
	DecisionScaleInRequested DecisionKind = "ScaleInRequested"
	// DecisionShrinkOne: one member was removed.
	DecisionShrinkOne DecisionKind = "ShrinkOne"
	// DecisionScaleInWithdrawn: the target went back to the size before a scale-in request was
	// carried out; it ends that request, so asking again starts a new stabilization window.
	DecisionScaleInWithdrawn DecisionKind = "ScaleInWithdrawn"
)

// DecisionSource says where a capacity request came from.
// +kubebuilder:validation:Enum=Manual;Recommendation
type DecisionSource string

const (
	SourceManual         DecisionSource = "Manual"
	SourceRecommendation DecisionSource = "Recommendation"
)

// CapacityDecision is one entry of the capacity-policy history.
type CapacityDecision struct {
	// time the decision was made, RFC 3339 in UTC or with an offset, T and Z in upper case.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	Time metav1.Time `json:"time"`
	// kind of decision.
	Kind DecisionKind `json:"kind"`
	// from is the size before the decision.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	From int32 `json:"from"`
	// to is the size after it (for ScaleInRequested, the requested target).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	To int32 `json:"to"`
	// source of the request.
	Source DecisionSource `json:"source"`
}

// CelldReservationList is a list of CelldReservations.
// +kubebuilder:object:root=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CelldReservationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CelldReservation `json:"items"`
}
