// Package kinds is the one table of the object kinds the operator reads and writes: what each is
// called, its Go type, its API resource, whether the operator renders and applies it, and whether
// it is the fleet's workload. The event store, the machine, the simulator and the API driver all
// look a kind up here instead of switching on types of their own.
package kinds

import (
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// Kind is an object kind as the API server names it.
type Kind string

// The kinds the operator reads or writes.
const (
	Fleet                 Kind = "CelldFleet"
	Reservation           Kind = "CelldReservation"
	StatefulSet           Kind = "StatefulSet"
	Deployment            Kind = "Deployment"
	Pod                   Kind = "Pod"
	PersistentVolumeClaim Kind = "PersistentVolumeClaim"
	Node                  Kind = "Node"
	Service               Kind = "Service"
	NetworkPolicy         Kind = "NetworkPolicy"
	PodDisruptionBudget   Kind = "PodDisruptionBudget"
	StorageClass          Kind = "StorageClass"
	PriorityClass         Kind = "PriorityClass"
)

// Object is what every Kubernetes type in the table is.
type Object interface {
	metav1.Object
	runtime.Object
}

// Row is one kind.
type Row struct {
	Kind Kind
	// New returns an empty object of the kind's Go type: the type is how an object's kind is
	// recognised.
	New func() Object
	// Resource and Version name the kind's API resource: how a driver lists, watches and writes
	// objects of the kind without code of its own for it.
	Resource schema.GroupResource
	Version  string
	// Namespaced: the kind lives in a namespace.
	Namespaced bool
	// Generation: the API server bumps metadata.generation when the spec changes.
	Generation bool
	// Owned: the operator renders the kind from a fleet and server-side applies it; the fleet
	// controls it, and an observed twin is compared with the rendered object for drift.
	Owned bool
	// Workload: the kind runs the fleet's members. Its writes carry a premise on the fleet's and
	// the workload's generation; drift repair never replaces its spec whole.
	Workload bool
	// Suffixes (owned kinds only) are what the fleet's name takes to name the objects of the kind
	// the fleet renders, "" for the fleet's name itself. The objects under these names are the
	// fleet's or someone else's (NameTaken), never adopted; a new suffix also needs the fleets'
	// admission rule on names (TestAdmissionRefusesEveryDerivedSuffix).
	Suffixes []string
}

// GVR is the kind's API resource with its version.
func (r Row) GVR() schema.GroupVersionResource { return r.Resource.WithVersion(r.Version) }

// The suffixes of the names the operator derives from a fleet's name, beside the fleet's own:
// its peer Service and NetworkPolicy, and its clients' NetworkPolicy. Admission refuses a fleet
// name that ends in one of them: fleet "x-peers" would otherwise render the Service that fleet
// "x" renders as its peer Service, and two fleets would fight over it. With that rule, the
// derived names of two fleets of one namespace never meet (DerivedSuffixes,
// TestDerivedNamesNeverCollide).
const (
	SuffixPeers   = "-peers"
	SuffixClients = "-clients"
)

// Table lists every kind, owned kinds in the order they are applied (prerequisites first, the
// workload last).
var Table = []Row{
	{Kind: Fleet, New: func() Object { return &v1alpha1.CelldFleet{} },
		Resource: schema.GroupResource{Group: "celld.io", Resource: "celldfleets"}, Version: "v1alpha1", Namespaced: true, Generation: true},
	{Kind: Reservation, New: func() Object { return &v1alpha1.CelldReservation{} },
		Resource: schema.GroupResource{Group: "celld.io", Resource: "celldreservations"}, Version: "v1alpha1", Namespaced: true, Generation: true},
	{Kind: Service, New: func() Object { return &corev1.Service{} },
		Resource: schema.GroupResource{Resource: "services"}, Version: "v1", Namespaced: true, Owned: true, Suffixes: []string{"", SuffixPeers}},
	{Kind: NetworkPolicy, New: func() Object { return &networkingv1.NetworkPolicy{} },
		Resource: schema.GroupResource{Group: "networking.k8s.io", Resource: "networkpolicies"}, Version: "v1", Namespaced: true, Generation: true, Owned: true,
		Suffixes: []string{SuffixClients, SuffixPeers}},
	{Kind: PodDisruptionBudget, New: func() Object { return &policyv1.PodDisruptionBudget{} },
		Resource: schema.GroupResource{Group: "policy", Resource: "poddisruptionbudgets"}, Version: "v1", Namespaced: true, Generation: true, Owned: true,
		Suffixes: []string{""}},
	{Kind: StatefulSet, New: func() Object { return &appsv1.StatefulSet{} },
		Resource: schema.GroupResource{Group: "apps", Resource: "statefulsets"}, Version: "v1", Namespaced: true, Generation: true, Owned: true, Workload: true,
		Suffixes: []string{""}},
	{Kind: Deployment, New: func() Object { return &appsv1.Deployment{} },
		Resource: schema.GroupResource{Group: "apps", Resource: "deployments"}, Version: "v1", Namespaced: true, Generation: true, Owned: true, Workload: true,
		Suffixes: []string{""}},
	{Kind: Pod, New: func() Object { return &corev1.Pod{} },
		Resource: schema.GroupResource{Resource: "pods"}, Version: "v1", Namespaced: true},
	{Kind: PersistentVolumeClaim, New: func() Object { return &corev1.PersistentVolumeClaim{} },
		Resource: schema.GroupResource{Resource: "persistentvolumeclaims"}, Version: "v1", Namespaced: true},
	{Kind: Node, New: func() Object { return &corev1.Node{} },
		Resource: schema.GroupResource{Resource: "nodes"}, Version: "v1"},
	{Kind: StorageClass, New: func() Object { return &storagev1.StorageClass{} },
		Resource: schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}, Version: "v1"},
	{Kind: PriorityClass, New: func() Object { return &schedulingv1.PriorityClass{} },
		Resource: schema.GroupResource{Group: "scheduling.k8s.io", Resource: "priorityclasses"}, Version: "v1"},
}

var (
	byType = map[reflect.Type]*Row{}
	byKind = map[Kind]*Row{}
)

func init() {
	for i := range Table {
		r := &Table[i]
		t := reflect.TypeOf(r.New())
		if byType[t] != nil || byKind[r.Kind] != nil {
			panic(fmt.Sprintf("kinds: %s listed twice", r.Kind))
		}
		if r.Workload && !r.Owned {
			panic(fmt.Sprintf("kinds: workload %s must be owned", r.Kind))
		}
		if r.Owned != (len(r.Suffixes) > 0) || (r.Owned && !r.Namespaced) {
			// The operator finds an owned object by a name derived from the fleet's, in the
			// fleet's namespace: without one it could neither observe nor protect it.
			panic(fmt.Sprintf("kinds: %s: an owned kind is namespaced and names its objects, no other kind does", r.Kind))
		}
		byType[t], byKind[r.Kind] = r, r
	}
}

// Of names the kind of a typed object of the table, "" for any other.
func Of(obj any) Kind {
	if obj == nil {
		return ""
	}
	if r := byType[reflect.TypeOf(obj)]; r != nil {
		return r.Kind
	}
	return ""
}

// Lookup returns the row of a kind.
func Lookup(k Kind) (Row, bool) {
	r := byKind[k]
	if r == nil {
		return Row{}, false
	}
	return *r, true
}

// Owned lists the owned kinds' rows in apply order; with workloads false, only the kinds that
// are not workloads: the kinds every path handles alike, whatever they are.
func Owned(workloads bool) []Row {
	var out []Row
	for _, r := range Table {
		if r.Owned && (workloads || !r.Workload) {
			out = append(out, r)
		}
	}
	return out
}

// IsWorkload reports whether obj is of a workload kind.
func IsWorkload(obj any) bool {
	r := byType[reflect.TypeOf(obj)]
	return r != nil && r.Workload
}

// Ref names one object: what an action is about, whatever its content.
type Ref struct {
	Kind      Kind
	Namespace string
	Name      string
}

// RefOf is the reference of a typed object of the table.
func RefOf(obj metav1.Object) Ref {
	return Ref{Kind: Of(obj), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// String is how a person looks the object up: Kind/name.
func (r Ref) String() string { return string(r.Kind) + "/" + r.Name }

// IsWorkloadKind reports whether k is a workload kind.
func IsWorkloadKind(k Kind) bool {
	r := byKind[k]
	return r != nil && r.Workload
}
