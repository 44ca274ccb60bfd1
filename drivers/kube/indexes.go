package kube

import (
	"k8s.io/client-go/tools/cache"

	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
)

// addIndexers gives each cache the indexes of events.Indexers: the ones the simulator's store
// carries, so that events.Gather reads both alike.
func (i *Informers) addIndexers() {
	i.indexKinds()
	for kind, inf := range i.byKind {
		indexers := cache.Indexers{}
		for name, f := range events.Indexers(kind) {
			indexers[name] = f
		}
		if len(indexers) > 0 {
			must(inf.AddIndexers(indexers))
		}
	}
}

var _ events.Caches = (*Informers)(nil)

// Cache is the indexer of a kind's informer, nil for a kind not watched.
func (i *Informers) Cache(kind kinds.Kind) events.Index {
	if inf := i.informer(kind); inf != nil {
		return inf.GetIndexer()
	}
	return nil
}

// Synced reports whether a kind's informer synced; false for a kind not watched.
func (i *Informers) Synced(kind kinds.Kind) bool {
	inf := i.informer(kind)
	return inf != nil && inf.HasSynced()
}

func (i *Informers) informer(kind kinds.Kind) cache.SharedIndexInformer { return i.byKind[kind] }

// indexKinds maps every kind to its cache, once the caches exist.
func (i *Informers) indexKinds() {
	i.byKind = map[kinds.Kind]cache.SharedIndexInformer{kinds.Fleet: i.Fleets, kinds.Reservation: i.Reservations,
		kinds.StatefulSet: i.StatefulSets, kinds.Deployment: i.Deployments, kinds.Pod: i.Pods, kinds.PersistentVolumeClaim: i.PVCs,
		kinds.Node: i.Nodes, kinds.StorageClass: i.StorageClasses, kinds.PriorityClass: i.PriorityClasses}
	if i.ServiceAccounts != nil {
		i.byKind[events.ServiceAccounts] = i.ServiceAccounts
	}
	for k, inf := range i.owned {
		i.byKind[k] = inf
	}
}
