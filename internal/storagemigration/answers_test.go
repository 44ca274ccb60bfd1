package storagemigration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	k8stesting "k8s.io/client-go/testing"
)

// TestEveryAnswerToARewrite: of all the API server may answer a rewrite, only a conflict (the
// object was written meanwhile, so in the storage version) and NotFound (deleted meanwhile)
// leave the object needing nothing. Any other answer leaves it stored as it was, in a version
// the CRD would then no longer list: the migration stops, names the object, and the CRD's stored
// versions stay as they were, so the old version cannot be dropped while an object needs it.
func TestEveryAnswerToARewrite(t *testing.T) {
	gr := fleets.GroupResource()
	for _, c := range []struct {
		name    string
		err     error
		skipped bool
	}{
		{"Conflict", apierrors.NewConflict(gr, "two", errors.New("changed")), true},
		{"NotFound", apierrors.NewNotFound(gr, "two"), true},
		{"Invalid", apierrors.NewInvalid(fleets.GroupVersion().WithKind("CelldFleet").GroupKind(), "two",
			field.ErrorList{field.Invalid(field.NewPath("spec", "members"), 0, "must be at least 1")}), false},
		{"Forbidden", apierrors.NewForbidden(gr, "two", errors.New("denied by policy")), false},
		{"Unauthorized", apierrors.NewUnauthorized("token expired"), false},
		{"BadRequest", apierrors.NewBadRequest("the object has no apiVersion"), false},
		{"TooManyRequests", apierrors.NewTooManyRequests("the API server is busy", 1), false},
		{"ServerTimeout", apierrors.NewServerTimeout(gr, "update", 1), false},
		{"Timeout", apierrors.NewTimeoutError("request timed out", 1), false},
		{"InternalError", apierrors.NewInternalError(errors.New("etcd unavailable")), false},
		{"ServiceUnavailable", apierrors.NewServiceUnavailable("conversion webhook unavailable"), false},
		{"Gone", apierrors.NewGone("gone"), false},
		{"MethodNotSupported", apierrors.NewMethodNotSupported(gr, "update"), false},
		{"RequestEntityTooLarge", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), false},
		{"the client's deadline", context.DeadlineExceeded, false},
		{"a broken connection", errors.New("connection reset by peer"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := client(crd("v1alpha1", "v1beta1"), fleet("team-a", "one"), fleet("team-b", "two"), fleet("team-c", "three"))
			cl.PrependReactor("update", "celldfleets", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured).GetName() == "two" {
					return true, nil, c.err
				}
				return false, nil, nil
			})
			res, err := Migrate(context.Background(), cl, []string{"celldfleets.celld.io"})
			got := storedVersions(t, cl)
			if c.skipped {
				if err != nil || !slices.Equal(got, []string{"v1beta1"}) || len(res) != 1 || res[0].Rewritten != 2 || res[0].Skipped != 1 {
					t.Errorf("err %v, stored %v, result %+v: want two rewritten, one skipped, [v1beta1]", err, got, res)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "team-b/two") || !errors.Is(err, c.err) {
				t.Errorf("err %v; want one naming team-b/two that wraps %v", err, c.err)
			}
			if !slices.Equal(got, []string{"v1alpha1", "v1beta1"}) {
				t.Errorf("stored versions %v after the rewrite was answered %v, want them as they were", got, c.err)
			}
		})
	}
}

// pager answers the lists of fleets in pages of at most size objects, as the API server may
// answer a list with a limit, and records the continue token each list asked with. (The fake
// dynamic client drops a list's limit and continue token before its reactors see them.)
type pager struct {
	dynamic.Interface
	objects []*unstructured.Unstructured
	size    int
	asked   []string
	// expire, when set, answers the list that continues from it 410 Gone: the token expired.
	expire string
}

func (p *pager) Resource(r schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	if r != fleets {
		return p.Interface.Resource(r)
	}
	return pagedResource{p.Interface.Resource(r), p}
}

type pagedResource struct {
	dynamic.NamespaceableResourceInterface
	p *pager
}

func (r pagedResource) List(_ context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	p := r.p
	p.asked = append(p.asked, opts.Continue)
	if len(p.asked) > len(p.objects)+1 {
		return nil, fmt.Errorf("listed %d times for %d objects: the pages do not move on", len(p.asked), len(p.objects))
	}
	if opts.Limit <= 0 {
		return nil, fmt.Errorf("list with limit %d: the migration must ask for pages", opts.Limit)
	}
	if opts.Continue != "" && opts.Continue == p.expire {
		return nil, apierrors.NewResourceExpired("the provided continue parameter is too old")
	}
	from := 0
	if opts.Continue != "" {
		if _, err := fmt.Sscanf(opts.Continue, "page-from-%d", &from); err != nil {
			return nil, apierrors.NewBadRequest("unknown continue token " + opts.Continue)
		}
	}
	to := min(from+min(int(opts.Limit), p.size), len(p.objects))
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "celld.io/v1beta1", "kind": "CelldFleetList"}}
	for _, o := range p.objects[from:to] {
		list.Items = append(list.Items, *o.DeepCopy())
	}
	if to < len(p.objects) {
		list.SetContinue(fmt.Sprintf("page-from-%d", to))
	}
	return list, nil
}

// TestListsInPages: a list the API server answers in pages is followed to its last page, each
// page asked with the token the previous one gave, and every object of every page is rewritten
// before the CRD says no other version is stored. A token that expires stops the migration with
// nothing recorded.
func TestListsInPages(t *testing.T) {
	var objects []*unstructured.Unstructured
	var names []string
	for i := range 7 {
		o := fleet(fmt.Sprintf("team-%d", i%3), fmt.Sprintf("f%d", i))
		objects = append(objects, o)
		names = append(names, o.GetNamespace()+"/"+o.GetName())
	}
	slices.Sort(names)
	seed := []runtime.Object{crd("v1alpha1", "v1beta1")}
	for _, o := range objects {
		seed = append(seed, o)
	}

	cl := client(seed...)
	p := &pager{Interface: cl, objects: objects, size: 3}
	res, err := Migrate(context.Background(), p, []string{"celldfleets.celld.io"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"", "page-from-3", "page-from-6"}; !slices.Equal(p.asked, want) {
		t.Errorf("lists asked with continue tokens %q, want %q", p.asked, want)
	}
	objs, status := updates(cl)
	if !slices.Equal(objs, names) || status != 1 || res[0].Rewritten != len(names) {
		t.Errorf("rewrote %v (result %+v) and the CRD's status %d times; want every object of every page, %v, then the status once", objs, res[0], status, names)
	}
	if got := storedVersions(t, cl); !slices.Equal(got, []string{"v1beta1"}) {
		t.Errorf("stored versions %v, want [v1beta1]", got)
	}

	cl = client(seed...)
	p = &pager{Interface: cl, objects: objects, size: 3, expire: "page-from-3"}
	_, err = Migrate(context.Background(), p, []string{"celldfleets.celld.io"})
	if err == nil || !apierrors.IsResourceExpired(err) {
		t.Errorf("a continue token that expired: err %v, want the 410 it was answered", err)
	}
	if got := storedVersions(t, cl); !slices.Equal(got, []string{"v1alpha1", "v1beta1"}) {
		t.Errorf("stored versions %v after a list that stopped on its second page, want them as they were", got)
	}
}
