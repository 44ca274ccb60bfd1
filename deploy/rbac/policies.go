// Package rbac embeds the admission policies beside it, as they ship, so that their
// tests judge the very bytes a build reads: make mutants changes a policy through a build
// overlay, which a read of the file at test time would not see. kubectl apply -f deploy/rbac/
// reads only the YAML.
package rbac

import _ "embed"

// BucketPolicy is bucket_policy.yaml: which namespaces may create fleets of which buckets.
//
//go:embed bucket_policy.yaml
var BucketPolicy []byte

// ReservationPolicy is reservation_policy.yaml: reservations are written by the operator alone.
//
//go:embed reservation_policy.yaml
var ReservationPolicy []byte

// ReadinessDefault is readiness_default.yaml: the readiness timing a fleet created without one gets.
//
//go:embed readiness_default.yaml
var ReadinessDefault []byte
