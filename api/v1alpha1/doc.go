// Package v1alpha1 holds the celld.io/v1alpha1 API: CelldFleet, one independent celld cluster,
// and CelldReservation, the fleet's permanent storage reservation that outlives it.
//
// +k8s:deepcopy-gen=package
// +groupName=celld.io
package v1alpha1
