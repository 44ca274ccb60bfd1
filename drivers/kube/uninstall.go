package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// FleetCRD is the name of the CelldFleet CustomResourceDefinition.
var FleetCRD = "celldfleets." + v1alpha1.GroupName

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// uninstalling reports whether the CelldFleet CustomResourceDefinition is being deleted, or is
// gone: every fleet is then deleted by the API server, not by a person, and the operator keeps
// their disks. It is read fresh (metadata only) and only for a fleet being deleted, since the
// answer decides whether disks are deleted; an error is an error, never a guess. Without a
// metadata client (unit tests) nothing is ever uninstalling.
func uninstalling(ctx context.Context, meta metadata.Interface) (bool, error) {
	if meta == nil {
		return false, nil
	}
	crd, err := meta.Resource(crdResource).Get(ctx, FleetCRD, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read CustomResourceDefinition %s: %w", FleetCRD, err)
	}
	return crd.DeletionTimestamp != nil, nil
}
