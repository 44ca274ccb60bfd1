package storagemigration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

var fleets = schema.GroupVersionResource{Group: "celld.io", Version: "v1beta1", Resource: "celldfleets"}

func crd(stored ...string) *unstructured.Unstructured {
	storedAny := make([]any, len(stored))
	for i, s := range stored {
		storedAny[i] = s
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "celldfleets.celld.io", "resourceVersion": "1"},
		"spec": map[string]any{"group": "celld.io", "names": map[string]any{"plural": "celldfleets", "kind": "CelldFleet"},
			"versions": []any{
				map[string]any{"name": "v1alpha1", "served": true, "storage": false},
				map[string]any{"name": "v1beta1", "served": true, "storage": true},
			}},
		"status": map[string]any{"storedVersions": storedAny},
	}}
}

func fleet(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "celld.io/v1beta1", "kind": "CelldFleet",
		"metadata": map[string]any{"namespace": ns, "name": name, "resourceVersion": "7"},
		"spec":     map[string]any{"members": int64(3)},
	}}
}

func client(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	s := runtime.NewScheme()
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(s, map[schema.GroupVersionResource]string{
		fleets: "CelldFleetList",
		{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}: "CustomResourceDefinitionList",
	}, objs...)
}

func storedVersions(t *testing.T, c *dynamicfake.FakeDynamicClient) []string {
	t.Helper()
	got, err := c.Resource(crdResource).Get(context.Background(), "celldfleets.celld.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, _, _ := unstructured.NestedStringSlice(got.Object, "status", "storedVersions")
	return v
}

func updates(c *dynamicfake.FakeDynamicClient) (objects []string, status int) {
	for _, a := range c.Actions() {
		u, ok := a.(k8stesting.UpdateAction)
		if !ok {
			continue
		}
		if a.GetResource().Resource == "customresourcedefinitions" {
			if a.GetSubresource() == "status" {
				status++
			}
			continue
		}
		m, _ := u.GetObject().(*unstructured.Unstructured)
		objects = append(objects, m.GetNamespace()+"/"+m.GetName())
	}
	slices.Sort(objects)
	return objects, status
}

// Every object is written back once, in the storage version, and only then does the CRD say no
// other version is stored; a second run finds nothing to do.
func TestEveryObjectRewrittenThenRecorded(t *testing.T) {
	c := client(crd("v1alpha1", "v1beta1"), fleet("team-a", "one"), fleet("team-b", "two"), fleet("team-b", "three"))
	res, err := Migrate(context.Background(), c, []string{"celldfleets.celld.io"})
	if err != nil {
		t.Fatal(err)
	}
	objs, status := updates(c)
	if want := []string{"team-a/one", "team-b/three", "team-b/two"}; !slices.Equal(objs, want) || status != 1 {
		t.Errorf("rewrote %v and the CRD's status %d times, want %v and once", objs, status, want)
	}
	if got := storedVersions(t, c); !slices.Equal(got, []string{"v1beta1"}) {
		t.Errorf("stored versions %v, want [v1beta1]", got)
	}
	if len(res) != 1 || res[0].Rewritten != 3 || res[0].Storage != "v1beta1" || !strings.Contains(res[0].String(), "3 objects rewritten as v1beta1") {
		t.Errorf("result %+v (%s)", res, res[0])
	}

	c.ClearActions()
	res, err = Migrate(context.Background(), c, []string{"celldfleets.celld.io"})
	if objs, status := updates(c); err != nil || len(objs) != 0 || status != 0 {
		t.Errorf("a second run: %v, rewrote %v, status %d: want nothing done", err, objs, status)
	}
	if !strings.Contains(res[0].String(), "already") {
		t.Errorf("a second run says %q", res[0])
	}
}

// An object written or deleted meanwhile needs nothing; any other refusal stops the migration
// before the CRD says every object is stored in the new version.
func TestRefusedRewriteRecordsNothing(t *testing.T) {
	for _, c := range []struct {
		err     error
		wantErr bool
	}{
		{apierrors.NewConflict(fleets.GroupResource(), "two", fmt.Errorf("changed")), false},
		{apierrors.NewNotFound(fleets.GroupResource(), "two"), false},
		{apierrors.NewForbidden(fleets.GroupResource(), "two", fmt.Errorf("denied by policy")), true},
	} {
		cl := client(crd("v1alpha1", "v1beta1"), fleet("team-a", "one"), fleet("team-b", "two"))
		cl.PrependReactor("update", "celldfleets", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured).GetName() == "two" {
				return true, nil, c.err
			}
			return false, nil, nil
		})
		res, err := Migrate(context.Background(), cl, []string{"celldfleets.celld.io"})
		got := storedVersions(t, cl)
		if c.wantErr {
			if err == nil || !strings.Contains(err.Error(), "team-b/two") || !strings.Contains(err.Error(), "denied by policy") {
				t.Errorf("%v: err %v, want one naming team-b/two and the refusal", c.err, err)
			}
			if !slices.Equal(got, []string{"v1alpha1", "v1beta1"}) {
				t.Errorf("%v: stored versions %v after a refused rewrite, want them as they were", c.err, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, []string{"v1beta1"}) || res[0].Rewritten != 1 || res[0].Skipped != 1 {
			t.Errorf("%v: err %v, stored %v, result %+v: want one rewritten, one skipped, [v1beta1]", c.err, err, got, res)
		}
	}
}

// A CRD changed meanwhile is read again before its status is written; one whose storage version
// moved meanwhile is not recorded as migrated.
func TestCRDChangedMeanwhile(t *testing.T) {
	for _, moved := range []bool{false, true} {
		c := client(crd("v1alpha1", "v1beta1"), fleet("team-a", "one"))
		conflicts := 0
		c.PrependReactor("update", "customresourcedefinitions", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "status" || conflicts > 0 {
				return false, nil, nil
			}
			conflicts++
			if moved {
				changed := crd("v1alpha1", "v1beta1")
				versions, _, _ := unstructured.NestedSlice(changed.Object, "spec", "versions")
				versions[0].(map[string]any)["storage"], versions[1].(map[string]any)["storage"] = true, false
				_ = unstructured.SetNestedSlice(changed.Object, versions, "spec", "versions")
				if err := c.Tracker().Update(crdResource, changed, ""); err != nil {
					t.Fatal(err)
				}
			}
			return true, nil, apierrors.NewConflict(crdResource.GroupResource(), "celldfleets.celld.io", fmt.Errorf("changed"))
		})
		_, err := Migrate(context.Background(), c, []string{"celldfleets.celld.io"})
		got := storedVersions(t, c)
		if moved {
			if err == nil || !strings.Contains(err.Error(), "run the migration again") || !slices.Equal(got, []string{"v1alpha1", "v1beta1"}) {
				t.Errorf("storage moved meanwhile: err %v, stored %v; want an error and the stored versions as they were", err, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, []string{"v1beta1"}) {
			t.Errorf("CRD changed meanwhile: err %v, stored %v; want [v1beta1] on the second try", err, got)
		}
	}
}
