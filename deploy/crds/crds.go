// Package crds embeds the CustomResourceDefinitions beside it, as controller-gen writes them and
// as they ship, so a program can check a manifest against the very schema and rules the API
// server will (celld-operator render does). kubectl apply -f deploy/crds/ reads only the YAML.
package crds

import _ "embed"

// CelldFleet is celld.io_celldfleets.yaml: the CelldFleet CRD.
//
//go:embed celld.io_celldfleets.yaml
var CelldFleet []byte

// CelldReservation is celld.io_celldreservations.yaml: the CelldReservation CRD.
//
//go:embed celld.io_celldreservations.yaml
var CelldReservation []byte

// CelldBucketPolicy is celld.io_celldbucketpolicies.yaml: the CelldBucketPolicy CRD, the parameters
// of the admission policy deploy/rbac/bucket_policy.yaml.
//
//go:embed celld.io_celldbucketpolicies.yaml
var CelldBucketPolicy []byte
