package events

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/reservation"
)

// Store folds events into the latest known state of every object: the in-memory twin of an
// informer cache. Events may arrive duplicated, reordered or stale: an event older than what the
// store holds or last deleted under that name (by resourceVersion) is dropped, so folding is
// idempotent and order-insensitive for any one name.
type Store struct {
	now     time.Time
	objects map[string]map[string]metav1.Object // kind -> namespace/name -> object
	// seen is the newest resourceVersion folded per kind and name, deletions included: the
	// tombstone that keeps a late event from bringing back a deleted or replaced object.
	seen   map[string]string
	util   map[FleetKey]*Utilization
	synced bool
}

// NewStore returns an empty store. Node observations count as synced once MarkSynced is called.
func NewStore() *Store {
	return &Store{objects: map[string]map[string]metav1.Object{}, seen: map[string]string{}, util: map[FleetKey]*Utilization{}}
}

// MarkSynced records that the store holds every node (the informer caches synced).
func (s *Store) MarkSynced() { s.synced = true }

// Now is the time of the latest event folded.
func (s *Store) Now() time.Time { return s.now }

// Apply folds one event into the store.
func (s *Store) Apply(ev Event) {
	if ev.Time.After(s.now) {
		s.now = ev.Time
	}
	switch ev.Kind {
	case TimePassed:
		return
	case UtilizationObserved:
		s.util[ev.Fleet] = ev.Utilization
		return
	}
	o, ok := ev.Object.(metav1.Object)
	if !ok {
		return
	}
	kind := string(kinds.Of(ev.Object))
	m := s.objects[kind]
	if m == nil {
		m = map[string]metav1.Object{}
		s.objects[kind] = m
	}
	key := o.GetNamespace() + "/" + o.GetName()
	rv := o.GetResourceVersion()
	gone := ev.Kind == Gone
	if last, ok := s.seen[kind+"/"+key]; ok && (newer(last, rv) || (last == rv && !gone)) {
		return // stale, or a repeat of what the store already folded
	}
	s.seen[kind+"/"+key] = rv
	if gone {
		if old, had := m[key]; had && old.GetUID() != o.GetUID() {
			return // a newer object of the same name replaced it already
		}
		delete(m, key)
		return
	}
	m[key] = o
}

// newer reports whether resource version a is strictly newer than b. Versions are compared as
// decimal numbers across objects, which the simulator and etcd both produce; clients must not
// rely on that, but an in-memory twin may.
func newer(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

// Fleets lists the keys of the fleets the store holds, sorted by namespace/name.
func (s *Store) Fleets() []FleetKey {
	keys := make([]FleetKey, 0, len(s.objects["CelldFleet"]))
	for _, f := range s.objects["CelldFleet"] {
		keys = append(keys, KeyOf(f))
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// Observe gathers what the store holds about one fleet, the way the operator gathers it from its
// informer caches.
func (s *Store) Observe(key FleetKey) *Observation {
	namespace, name := key.Namespace, key.Name
	o := &Observation{Now: s.now, Nodes: map[string]*corev1.Node{}, NodesSynced: s.synced, Utilization: s.util[key]}
	f, _ := s.objects["CelldFleet"][key.String()].(*v1alpha1.CelldFleet)
	o.Fleet = f
	for _, n := range s.objects["Node"] {
		o.Nodes[n.GetName()] = n.(*corev1.Node)
	}
	if f == nil {
		return o
	}
	for _, r := range s.objects["CelldReservation"] {
		res := r.(*v1alpha1.CelldReservation)
		if reservation.SameBucket(res.Spec.Bucket, f.Spec.Bucket) && MadeByOperator(res) {
			o.Reservations = append(o.Reservations, res)
		}
	}
	// A reservation under the name the fleet would create that the operator did not make: the
	// fleet's own cannot be created, and this one is never trusted nor written to.
	rname := reservation.Name(reservation.IdentityOf(f.Spec.Bucket))
	if r, ok := s.objects["CelldReservation"][namespace+"/"+rname].(*v1alpha1.CelldReservation); ok && !MadeByOperator(r) {
		o.Unowned = append(o.Unowned, "CelldReservation/"+rname)
	}
	for _, obj := range s.sorted("CelldFleet") {
		if r := obj.(*v1alpha1.CelldFleet); r.UID != f.UID && reservation.SameBucket(r.Spec.Bucket, f.Spec.Bucket) {
			o.Rivals = append(o.Rivals, r)
		}
	}
	// The objects under the fleet's derived names, as the operator looks them up: by name, ours
	// only when the fleet controls them.
	derived := func(kind, name string) metav1.Object {
		obj, ok := s.objects[kind][namespace+"/"+name]
		if !ok {
			return nil
		}
		if !ControlledBy(obj, f.UID) {
			o.Unowned = append(o.Unowned, kind+"/"+name)
			return nil
		}
		return obj
	}
	if sts := derived("StatefulSet", name); sts != nil {
		o.StatefulSet = sts.(*appsv1.StatefulSet)
	}
	if d := derived("Deployment", name); d != nil {
		o.Deployment = d.(*appsv1.Deployment)
	}
	for _, d := range DerivedObjects(f) {
		if kinds.IsWorkloadKind(kinds.Kind(d.Kind)) {
			continue // looked up above, whichever the fleet uses
		}
		if obj := derived(d.Kind, d.Name); obj != nil {
			o.Owned = append(o.Owned, obj.(kinds.Object))
		}
	}
	for _, obj := range s.sorted("Pod") {
		if obj.GetNamespace() == namespace && obj.GetLabels()[LabelFleetUID] == string(f.UID) {
			o.Pods = append(o.Pods, obj.(*corev1.Pod))
		}
	}
	for _, obj := range s.sorted("PersistentVolumeClaim") {
		fleet, _, named := ClaimFleet(obj.GetName())
		if obj.GetNamespace() == namespace && (obj.GetLabels()[LabelInstance] == f.Name || named && fleet == f.Name) {
			o.PVCs = append(o.PVCs, obj.(*corev1.PersistentVolumeClaim))
		}
	}
	if f.Spec.Storage != nil {
		o.StorageClassKnown = s.synced
		if sc, ok := s.objects["StorageClass"]["/"+f.Spec.Storage.StorageClassName].(*storagev1.StorageClass); ok {
			o.StorageClass = sc
		}
	}
	return o
}

func (s *Store) sorted(kind string) []metav1.Object {
	m := s.objects[kind]
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]metav1.Object, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}
