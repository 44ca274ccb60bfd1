package kube

import (
	"context"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/celld/celld-operator/kinds"
)

// ownedClients is how the Applier reads and writes each owned kind of kinds.Table: the typed
// client of the kind's Go type, found in the clientset once, so a kind added to the table needs
// no code here (TestEveryOwnedKindHasAClient). The typed client, rather than a dynamic one, keeps
// every request what it was (one GET, one apply PATCH, the same encoding), and works as well on
// the fake clientset the tests count requests on.
var ownedClients = func() map[kinds.Kind]typedAccessor {
	out := map[kinds.Kind]typedAccessor{}
	for _, r := range kinds.Owned(true) {
		if a, ok := findTypedClient(reflect.TypeOf(r.New())); ok {
			out[r.Kind] = a
		}
	}
	return out
}()

// typedAccessor names the typed client of one kind in kubernetes.Interface: the group method
// (CoreV1) and the resource method (Services).
type typedAccessor struct {
	group, resource string
	namespaced      bool
}

// findTypedClient looks for the group and resource methods whose client's Get returns objects of
// type t: the clientset's own map from Go type to client, which client-go does not export.
func findTypedClient(t reflect.Type) (typedAccessor, bool) {
	cs := reflect.TypeOf((*kubernetes.Interface)(nil)).Elem()
	for i := range cs.NumMethod() {
		gm := cs.Method(i)
		if gm.Type.NumIn() != 0 || gm.Type.NumOut() != 1 || gm.Type.Out(0).Kind() != reflect.Interface {
			continue
		}
		group := gm.Type.Out(0)
		for j := range group.NumMethod() {
			rm := group.Method(j)
			namespaced := rm.Type.NumIn() == 1 && rm.Type.In(0).Kind() == reflect.String
			if (rm.Type.NumIn() != 0 && !namespaced) || rm.Type.NumOut() != 1 || rm.Type.Out(0).Kind() != reflect.Interface {
				continue
			}
			get, ok := rm.Type.Out(0).MethodByName("Get")
			if ok && get.Type.NumOut() == 2 && get.Type.Out(0) == t {
				return typedAccessor{group: gm.Name, resource: rm.Name, namespaced: namespaced}, true
			}
		}
	}
	return typedAccessor{}, false
}

// client is the kind's typed client in namespace.
func (a typedAccessor) client(k kubernetes.Interface, namespace string) objectClient {
	g := reflect.ValueOf(k).MethodByName(a.group).Call(nil)[0]
	var args []reflect.Value
	if a.namespaced {
		args = []reflect.Value{reflect.ValueOf(namespace)}
	}
	return reflectClient{g.MethodByName(a.resource).Call(args)[0]}
}

// objectClient reads, patches and creates objects of one kind in one namespace.
type objectClient interface {
	get(ctx context.Context, name string) (metav1.Object, error)
	// patch returns the object as the server answered the patch.
	patch(ctx context.Context, name string, pt types.PatchType, body []byte, opts metav1.PatchOptions) (kinds.Object, error)
	create(ctx context.Context, obj runtime.Object, opts metav1.CreateOptions) error
	list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
}

// reflectClient calls a typed client's Get, Patch, Create and List, whose signatures every typed
// client of client-go shares but no interface names.
type reflectClient struct{ c reflect.Value }

func (r reflectClient) call(method string, args ...any) (any, error) {
	in := make([]reflect.Value, len(args))
	for i, a := range args {
		in[i] = reflect.ValueOf(a)
	}
	out := r.c.MethodByName(method).Call(in)
	if err, _ := out[1].Interface().(error); err != nil {
		return nil, err
	}
	return out[0].Interface(), nil
}

func (r reflectClient) get(ctx context.Context, name string) (metav1.Object, error) {
	o, err := r.call("Get", ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return o.(metav1.Object), nil
}

func (r reflectClient) patch(ctx context.Context, name string, pt types.PatchType, body []byte, opts metav1.PatchOptions) (kinds.Object, error) {
	out, err := r.call("Patch", ctx, name, pt, body, opts)
	if err != nil {
		return nil, err
	}
	obj, _ := out.(kinds.Object)
	return obj, nil
}

func (r reflectClient) create(ctx context.Context, obj runtime.Object, opts metav1.CreateOptions) error {
	_, err := r.call("Create", ctx, obj, opts)
	return err
}

func (r reflectClient) list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	l, err := r.call("List", ctx, opts)
	if err != nil {
		return nil, err
	}
	return l.(runtime.Object), nil
}

// Create creates obj, an object of an owned kind of kinds.Table, in namespace with its typed
// client: what the benchmark's operator-less baseline does for every object a fleet renders.
func Create(ctx context.Context, k kubernetes.Interface, namespace string, obj kinds.Object) error {
	a, ok := ownedClients[kinds.Of(obj)]
	if !ok {
		return fmt.Errorf("create: %T is not an owned kind", obj)
	}
	return a.client(k, namespace).create(ctx, obj, metav1.CreateOptions{})
}

// List lists the objects of an owned kind of kinds.Table in namespace, decoded into the kind's Go
// types as the operator's caches decode them: what the benchmark measures those caches by.
func List(ctx context.Context, k kubernetes.Interface, namespace string, kind kinds.Kind, opts metav1.ListOptions) (runtime.Object, error) {
	a, ok := ownedClients[kind]
	if !ok {
		return nil, fmt.Errorf("list: %s is not an owned kind", kind)
	}
	return a.client(k, namespace).list(ctx, opts)
}
