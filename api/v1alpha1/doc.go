// Package v1alpha1 holds the celld.io/v1alpha1 API: CelldFleet, one independent celld cluster,
// CelldReservation, the fleet's permanent storage reservation that outlives it, and
// CelldBucketPolicy, an administrator's word on which namespaces may use which buckets.
//
// +k8s:deepcopy-gen=package
// +groupName=celld.io
package v1alpha1
