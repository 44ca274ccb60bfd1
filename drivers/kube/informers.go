package kube

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
	"github.com/celld/celld-operator/api/generated/informers/externalversions"
	celldlisters "github.com/celld/celld-operator/api/generated/listers/celld/v1alpha1"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// Informers are the caches a sync reads. The informers' own resync is off: handlers skip
// same-resourceVersion updates, and the controller re-enqueues every fleet on its own period
// instead, so a resync costs one sync per fleet rather than one per cached object.
type Informers struct {
	Fleets          cache.SharedIndexInformer
	Reservations    cache.SharedIndexInformer
	StatefulSets    cache.SharedIndexInformer
	Deployments     cache.SharedIndexInformer
	Pods            cache.SharedIndexInformer
	PVCs            cache.SharedIndexInformer
	Nodes           cache.SharedIndexInformer
	StorageClasses  cache.SharedIndexInformer
	PriorityClasses cache.SharedIndexInformer
	ServiceAccounts cache.SharedIndexInformer // nil without a metadata client
	// owned caches every owned kind of kinds.Table that is not a workload, built from the kind's
	// API resource alone: a kind added to the table is cached with no code here.
	owned map[kinds.Kind]cache.SharedIndexInformer
	// byKind is every cache by its kind, events.ServiceAccounts included when watched.
	byKind map[kinds.Kind]cache.SharedIndexInformer

	fleetLister celldlisters.CelldFleetLister
	stsLister   appslisters.StatefulSetLister
	starters    []func(stop <-chan struct{})

	reportMu sync.Mutex
	onReport func(Undecodable)
}

// OnUndecodable sets what is told of every celld.io object that does not decode.
func (i *Informers) OnUndecodable(f func(Undecodable)) {
	i.reportMu.Lock()
	i.onReport = f
	i.reportMu.Unlock()
}

func (i *Informers) report(u Undecodable) {
	i.reportMu.Lock()
	f := i.onReport
	i.reportMu.Unlock()
	if f != nil {
		f(u)
	}
}

// ManagedSelector selects the member Pods the operator caches.
var ManagedSelector = labels.SelectorFromSet(labels.Set{kinds.LabelManagedBy: kinds.ManagedBy}).String()

// NewInformers builds the caches for fleets in namespaces (every namespace when empty). meta may
// be nil: the ServiceAccount cache is then absent and a missing ServiceAccount goes unnoticed by
// the machine (the API server still refuses the members' Pods).
func NewInformers(kube kubernetes.Interface, celld versioned.Interface, meta metadata.Interface, namespaces []string) *Informers {
	i := &Informers{}
	strip := informers.WithTransform(dropManagedFields)

	// Reservations are read in every namespace whatever --namespace says: a bucket is reserved to
	// one fleet cluster-wide, and a fleet must see a reservation made from another namespace.
	reservationFactory := externalversions.NewSharedInformerFactoryWithOptions(celld, 0,
		externalversions.WithTransform(keepSpecWriters))
	// Workloads are cached unfiltered: a hand edit that drops the operator's labels must still
	// show the workload, or the fleet would look unprovisioned and be re-provisioned. So are the
	// other kinds the operator creates, and claims: an object of someone else's under a name the
	// operator would create (a fleet's derived names, a member's claim) must be seen, whatever
	// its labels, or it would be taken over. Each namespace watched has its own factories.
	workloads := map[string]informers.SharedInformerFactory{}
	owned := map[string]informers.SharedInformerFactory{}
	fleetFactories := map[string]externalversions.SharedInformerFactory{}
	keys := namespaces
	if len(keys) == 0 {
		keys = []string{metav1.NamespaceAll}
	}
	for _, ns := range keys {
		workloads[ns] = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns), strip)
		owned[ns] = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns), strip,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = ManagedSelector }))
		fleetFactories[ns] = externalversions.NewSharedInformerFactoryWithOptions(celld, 0,
			externalversions.WithNamespace(ns), externalversions.WithTransform(dropManagedFields))
		i.starters = append(i.starters, workloads[ns].Start, owned[ns].Start, fleetFactories[ns].Start)
	}
	cluster := informers.NewSharedInformerFactoryWithOptions(kube, 0, strip)

	if rc, ok := celld.CelldV1alpha1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		// A real API server: fleets and reservations are decoded one by one (see tolerantLW).
		i.Fleets = perNamespace(namespaces, func(ns string) cache.SharedIndexInformer {
			return newTolerantInformer(rc, "celldfleets", "CelldFleet", ns,
				func() runtime.Object { return &v1alpha1.CelldFleet{} }, func() runtime.Object { return &v1alpha1.CelldFleetList{} }, i.report)
		})
		i.Reservations = newTolerantInformer(rc, "celldreservations", "CelldReservation", "",
			func() runtime.Object { return &v1alpha1.CelldReservation{} }, func() runtime.Object { return &v1alpha1.CelldReservationList{} }, i.report)
		// A reservation keeps the managedFields entries that wrote its spec: they tell the
		// operator's own reservations from anyone else's (madeByOperator).
		must(i.Fleets.SetTransform(dropManagedFields))
		must(i.Reservations.SetTransform(keepSpecWriters))
		for _, inf := range []cache.SharedIndexInformer{i.Fleets, i.Reservations} {
			informer := inf
			i.starters = append(i.starters, func(stop <-chan struct{}) { go informer.Run(stop) })
		}
	} else {
		i.Fleets = perNamespace(namespaces, func(ns string) cache.SharedIndexInformer {
			return fleetFactories[ns].Celld().V1alpha1().CelldFleets().Informer()
		})
		i.Reservations = reservationFactory.Celld().V1alpha1().CelldReservations().Informer()
	}
	i.fleetLister = celldlisters.NewCelldFleetLister(i.Fleets.GetIndexer())
	i.StatefulSets = perNamespace(namespaces, func(ns string) cache.SharedIndexInformer {
		return workloads[ns].Apps().V1().StatefulSets().Informer()
	})
	i.stsLister = appslisters.NewStatefulSetLister(i.StatefulSets.GetIndexer())
	i.Deployments = perNamespace(namespaces, func(ns string) cache.SharedIndexInformer {
		return workloads[ns].Apps().V1().Deployments().Informer()
	})
	i.Pods = perNamespace(namespaces, func(ns string) cache.SharedIndexInformer { return owned[ns].Core().V1().Pods().Informer() })
	i.PVCs = perNamespace(namespaces, func(ns string) cache.SharedIndexInformer {
		return workloads[ns].Core().V1().PersistentVolumeClaims().Informer()
	})
	i.owned = map[kinds.Kind]cache.SharedIndexInformer{}
	for _, r := range kinds.Owned(false) {
		i.owned[r.Kind] = perNamespace(namespaces, func(ns string) cache.SharedIndexInformer {
			inf, err := workloads[ns].ForResource(r.GVR())
			must(err)
			return inf.Informer()
		})
	}
	// The largest objects cached, and the least read of: see strip.go.
	must(i.Pods.SetTransform(stripPod))
	nodes := cluster.Core().V1().Nodes()
	i.Nodes = nodes.Informer()
	must(i.Nodes.SetTransform(stripNode))
	classes := cluster.Storage().V1().StorageClasses()
	i.StorageClasses = classes.Informer()
	prio := cluster.Scheduling().V1().PriorityClasses()
	i.PriorityClasses = prio.Informer()

	i.starters = append(i.starters, reservationFactory.Start, cluster.Start)
	if meta != nil {
		// Only the ServiceAccounts' names matter, so only their metadata is cached.
		i.ServiceAccounts = perNamespace(namespaces, func(ns string) cache.SharedIndexInformer {
			saFactory := metadatainformer.NewFilteredSharedInformerFactory(meta, 0, ns, nil)
			i.starters = append(i.starters, saFactory.Start)
			return saFactory.ForResource(corev1.SchemeGroupVersion.WithResource("serviceaccounts")).Informer()
		})
		must(i.ServiceAccounts.SetTransform(dropManagedFields))
	}
	i.addIndexers()
	return i
}

// dropManagedFields keeps the caches small: managedFields are often the largest part of an
// object, and nothing reads them.
func dropManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// Start starts every informer; they stop when stop is closed.
func (i *Informers) Start(stop <-chan struct{}) {
	for _, s := range i.starters {
		s(stop)
	}
}

// Owned is the cache of an owned kind that is not a workload, nil for any other kind.
func (i *Informers) Owned(k kinds.Kind) cache.SharedIndexInformer { return i.owned[k] }

func (i *Informers) all() []cache.SharedIndexInformer {
	out := []cache.SharedIndexInformer{i.Fleets, i.Reservations, i.StatefulSets, i.Deployments, i.Pods, i.PVCs}
	for _, r := range kinds.Owned(false) {
		out = append(out, i.owned[r.Kind])
	}
	out = append(out, i.Nodes, i.StorageClasses, i.PriorityClasses)
	if i.ServiceAccounts != nil {
		out = append(out, i.ServiceAccounts)
	}
	return out
}

// HasSynced reports whether every cache holds a complete list.
func (i *Informers) HasSynced() bool {
	for _, inf := range i.all() {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// WaitForCacheSync waits until every cache synced, false when ctx ended first.
func (i *Informers) WaitForCacheSync(ctx context.Context) bool {
	synced := make([]cache.InformerSynced, 0, 12)
	for _, inf := range i.all() {
		synced = append(synced, inf.HasSynced)
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
