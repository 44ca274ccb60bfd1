package sim

import (
	"fmt"
	"reflect"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// Kind names a kind of object the cluster stores.
type Kind = kinds.Kind

// The kinds the cluster stores.
const (
	KindFleet        = kinds.Fleet
	KindReservation  = kinds.Reservation
	KindStatefulSet  = kinds.StatefulSet
	KindDeployment   = kinds.Deployment
	KindPod          = kinds.Pod
	KindPVC          = kinds.PersistentVolumeClaim
	KindNode         = kinds.Node
	KindService      = kinds.Service
	KindPolicy       = kinds.NetworkPolicy
	KindPDB          = kinds.PodDisruptionBudget
	KindStorageClass = kinds.StorageClass
)

// kindOrder is the order Resync and every whole-cluster pass visit kinds in, so a run is
// reproducible: what others refer to first (nodes, classes, fleets, the workload), then every
// other kind of the table in its order (the owned kinds, whatever they are), claims and Pods last.
var kindOrder = func() []Kind {
	first := []Kind{KindNode, KindStorageClass, kinds.PriorityClass, KindFleet, KindReservation, KindStatefulSet, KindDeployment}
	last := []Kind{KindPVC, KindPod}
	out := slices.Clone(first)
	for _, r := range kinds.Table {
		if !slices.Contains(first, r.Kind) && !slices.Contains(last, r.Kind) {
			out = append(out, r.Kind)
		}
	}
	return append(out, last...)
}()

// object is what every stored Kubernetes type is.
type object = kinds.Object

func kindOf(obj any) (Kind, bool) {
	k := kinds.Of(obj)
	return k, k != ""
}

func mustKind(obj any) Kind {
	k, ok := kindOf(obj)
	if !ok {
		panic(fmt.Sprintf("sim: no kind for %T", obj))
	}
	return k
}

func key(namespace, name string) string { return namespace + "/" + name }

func keyOf(o metav1.Object) string { return key(o.GetNamespace(), o.GetName()) }

func copyOf(o object) object { return o.DeepCopyObject().(object) }

// get returns the stored object itself: callers that change it must copy it first.
func (c *Cluster) get(k Kind, namespace, name string) object {
	return c.objs[k][key(namespace, name)]
}

// list returns the stored objects of a kind in key order.
func (c *Cluster) list(k Kind) []object {
	m := c.objs[k]
	keys := make([]string, 0, len(m))
	for kk := range m {
		keys = append(keys, kk)
	}
	sort.Strings(keys)
	out := make([]object, len(keys))
	for i, kk := range keys {
		out[i] = m[kk]
	}
	return out
}

func (c *Cluster) pods() []*corev1.Pod {
	objs := c.list(KindPod)
	out := make([]*corev1.Pod, len(objs))
	for i, o := range objs {
		out[i] = o.(*corev1.Pod)
	}
	return out
}

func (c *Cluster) pod(namespace, name string) *corev1.Pod {
	p, _ := c.get(KindPod, namespace, name).(*corev1.Pod)
	return p
}

func (c *Cluster) fleet(namespace, name string) *v1alpha1.CelldFleet {
	f, _ := c.get(KindFleet, namespace, name).(*v1alpha1.CelldFleet)
	return f
}

func (c *Cluster) node(name string) *corev1.Node {
	n, _ := c.get(KindNode, "", name).(*corev1.Node)
	return n
}

func (c *Cluster) claim(namespace, name string) *corev1.PersistentVolumeClaim {
	p, _ := c.get(KindPVC, namespace, name).(*corev1.PersistentVolumeClaim)
	return p
}

// structField reaches a top-level struct field (Spec, Status) of a stored type; the zero Value
// when the type has none (a StorageClass has neither, a NetworkPolicy no status).
func structField(obj object, name string) reflect.Value {
	return reflect.ValueOf(obj).Elem().FieldByName(name)
}

// row is a stored kind's row of the table.
func row(k Kind) kinds.Row {
	r, _ := kinds.Lookup(k)
	return r
}
