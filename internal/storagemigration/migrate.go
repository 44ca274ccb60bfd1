// Package storagemigration rewrites every stored object of the celld.io CRDs in their storage
// version, then records on each CRD that no object is stored in any other version
// (status.storedVersions), so that an older version can later be dropped from the CRD.
//
// It is what kube-storage-version-migrator does, for three CRDs and with nothing to install: each
// object is updated as read, which changes nothing of it but the version the API server encodes
// it in. An object written meanwhile (a conflict) was re-encoded by that write, and one deleted
// needs nothing.
package storagemigration

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// CRDs are the celld.io CRDs, by name.
var CRDs = []string{"celldfleets.celld.io", "celldreservations.celld.io", "celldbucketpolicies.celld.io"}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Result is what Migrate did to one CRD.
type Result struct {
	CRD     string
	Storage string
	// Before is status.storedVersions as found.
	Before []string
	// Rewritten counts the objects written back; Skipped those written or deleted meanwhile.
	Rewritten, Skipped int
}

func (r Result) String() string {
	if r.Rewritten == 0 && r.Skipped == 0 && slices.Equal(r.Before, []string{r.Storage}) {
		return fmt.Sprintf("%s: every object stored as %s already", r.CRD, r.Storage)
	}
	return fmt.Sprintf("%s: %d objects rewritten as %s (%d written or deleted meanwhile); stored versions %v -> [%s]",
		r.CRD, r.Rewritten, r.Storage, r.Skipped, r.Before, r.Storage)
}

// Migrate migrates each CRD named, in order, and stops at the first error, naming it.
func Migrate(ctx context.Context, dyn dynamic.Interface, crds []string) ([]Result, error) {
	var out []Result
	for _, name := range crds {
		r, err := migrate(ctx, dyn, name)
		if err != nil {
			return out, fmt.Errorf("migrate the objects of %s: %w", name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func migrate(ctx context.Context, dyn dynamic.Interface, name string) (Result, error) {
	r := Result{CRD: name}
	crd, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return r, fmt.Errorf("read the CRD: %w", err)
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	r.Storage = storageOf(crd)
	if r.Storage == "" || group == "" || plural == "" {
		return r, fmt.Errorf("the CRD names no storage version, group or plural")
	}
	r.Before, _, _ = unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	if slices.Equal(r.Before, []string{r.Storage}) {
		return r, nil
	}
	res := dyn.Resource(schema.GroupVersionResource{Group: group, Version: r.Storage, Resource: plural})
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := res.List(ctx, opts)
		if err != nil {
			return r, fmt.Errorf("list %s: %w", plural, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			var err error
			if obj.GetNamespace() == "" {
				_, err = res.Update(ctx, obj, metav1.UpdateOptions{})
			} else {
				_, err = res.Namespace(obj.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{})
			}
			switch {
			case err == nil:
				r.Rewritten++
			case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
				r.Skipped++
			default:
				return r, fmt.Errorf("rewrite %s %s/%s: %w", plural, obj.GetNamespace(), obj.GetName(), err)
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			break
		}
	}
	// Every object is now stored as r.Storage: the API server encodes each write in the storage
	// version, and it was the storage version before the list began.
	for {
		if err := unstructured.SetNestedStringSlice(crd.Object, []string{r.Storage}, "status", "storedVersions"); err != nil {
			return r, err
		}
		_, err := dyn.Resource(crdResource).UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		if err == nil {
			return r, nil
		}
		if !apierrors.IsConflict(err) {
			return r, fmt.Errorf("record the stored versions [%s]: %w", r.Storage, err)
		}
		if crd, err = dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return r, fmt.Errorf("read the CRD: %w", err)
		}
		if storageOf(crd) != r.Storage {
			return r, fmt.Errorf("its storage version changed from %s to %s while the objects were rewritten: run the migration again", r.Storage, storageOf(crd))
		}
	}
}

// storageOf is the version a CRD stores its objects in, empty when it names none.
func storageOf(crd *unstructured.Unstructured) string {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if storage, _ := m["storage"].(bool); storage {
			name, _ := m["name"].(string)
			return name
		}
	}
	return ""
}
