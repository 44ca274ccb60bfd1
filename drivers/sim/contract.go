package sim

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// What the safety contract is about, recorded at the moment the operator's request reached the
// cluster, so checks judge each write against the cluster as it then was, not as it is later.

// Request is one API request the operator sent through Do.
type Request struct {
	Time   time.Time
	Action machine.ActionKind
	Key    string
	// Verb is create, apply, update, patch or delete; Resource is plural, with "/status" for the
	// status subresource, "events" for a Kubernetes Event.
	Verb      string
	Resource  string
	Namespace string
	Name      string
	// Reason is an Event's reason.
	Reason string
	// Changed: the request changed the cluster (a new resourceVersion, or a new Event). A
	// re-apply of what is already there, or a delete of what is gone, changes nothing.
	Changed bool
	// Retries counts conflicts the request re-read and retried through (AppendHistory).
	Retries int
	Err     error
	// FleetUID is the fleet whose object the request reached, as the cluster stored it just
	// before: a Pod's or claim's celld.io/fleet-uid label, the fleet's own UID for its
	// finalizer, status and Events, the fleet an applied object or reservation is written for.
	FleetUID types.UID
	// Status is the status a status update wrote.
	Status *v1alpha1.CelldFleetStatus
}

// ReplicaWrite is a write by the operator that created a workload or changed its spec.replicas.
type ReplicaWrite struct {
	Time      time.Time
	Kind      Kind
	Namespace string
	Name      string
	FleetUID  types.UID
	Created   bool
	// From is the replicas before the write (0 when Created), To after it.
	From, To int32
	// PrevRolledOut: the workload's previous change had rolled out when this one was written:
	// observedGeneration == generation, status replicas == updated == ready == spec replicas,
	// and no member terminating. False when Created.
	PrevRolledOut bool
	// NotReady counts the fleet's member Pods that were not ready or terminating.
	NotReady int
	// Cordoned counts the fleet's member Pods, not terminating, on a cordoned node: a drain may
	// evict any of them.
	Cordoned int
	// Members counts the fleet's member Pods, terminating ones included; for a workload Created,
	// the size the members not terminating make up, that it starts from (a StatefulSet's: one
	// past their highest ordinal).
	Members       int
	FleetDeleting bool
}

// WorkloadStop is a delete of a fleet's workload with propagation Background the cluster
// accepted from the operator: every member it owned stops at once.
type WorkloadStop struct {
	Time      time.Time
	Kind      Kind
	Namespace string
	Name      string
	// Preconditioned: the delete carried the workload's UID.
	Preconditioned bool
	// The fleet of the workload's name as stored when the delete arrived: its UID, whether it
	// asked to hibernate and whether its deletion was requested.
	FleetUID      types.UID
	FleetExists   bool
	Hibernate     bool
	FleetDeleting bool
	// Members counts the fleet's member Pods, terminating ones included.
	Members int
	// Claims are the fleet's claims (by its UID label), name to UID, at the delete.
	Claims map[string]types.UID
}

// AllReady reports whether every member was ready and none terminating at the write.
func (w ReplicaWrite) AllReady() bool { return w.NotReady == 0 }

// PodDeletion is a delete of a Pod the cluster accepted from the operator.
type PodDeletion struct {
	Time      time.Time
	Namespace string
	Name      string
	UID       types.UID
	// Preconditioned: the request carried a UID precondition.
	Preconditioned bool
	Force          bool
	Reason         string
	FleetUID       types.UID
	FleetDeleting  bool
	Node           string
	NodeState      NodeState
	// NodeFenced: the node carried the out-of-service taint at the delete.
	NodeFenced bool
	// NodeUnhealthySince is when the node's Ready condition last changed (or it was lost).
	NodeUnhealthySince time.Time
	WasReady           bool
	WasTerminating     bool
	// OtherNotReady counts the fleet's other member Pods that were not ready or terminating.
	OtherNotReady int
	// Grace is the fleet's healing grace period at the deletion (its spec's, or 5m when unset).
	Grace time.Duration
	// NotReadySince is when the Pod's Ready condition last changed, its creation when it has none.
	NotReadySince time.Time
	// ClaimLost: the Pod's data claim was missing, lost or being deleted.
	ClaimLost bool
	// RevisionBehind: a StatefulSet member on a revision other than its set's update revision.
	RevisionBehind bool
	// Deployment: the Pod belonged to a Deployment (no stable identity: its replacement gets
	// another name).
	Deployment bool
}

// DiskDeletion is a delete of a PersistentVolumeClaim the cluster accepted from the operator.
type DiskDeletion struct {
	Time           time.Time
	Namespace      string
	Name           string
	UID            types.UID
	Preconditioned bool
	// FleetUID and FleetName are the claim's celld.io/fleet-uid and app.kubernetes.io/instance.
	FleetUID  types.UID
	FleetName string
	// FleetExists: a fleet with that name and UID existed; FleetDeleting: it was being deleted.
	FleetExists   bool
	FleetDeleting bool
	FleetProfile  v1alpha1.Profile
	// MemberPods counts the Pods labelled with the claim's fleet UID, terminating ones included.
	MemberPods int
}

// DiskResize is a raise of a claim's storage request the cluster accepted from the operator.
type DiskResize struct {
	Time      time.Time
	Namespace string
	Name      string
	UID       types.UID
	// From is what the claim asked for before, To what the write asks for.
	From, To resource.Quantity
	// FleetUID and FleetName are the claim's celld.io/fleet-uid and app.kubernetes.io/instance;
	// FleetExists: a fleet with that name and UID existed, FleetSize its spec.storage.size.
	FleetUID    types.UID
	FleetName   string
	FleetExists bool
	FleetSize   resource.Quantity
}

// DiskResizes lists the claim resizes the cluster accepted from the operator, in order.
func (c *Cluster) DiskResizes() []DiskResize { return append([]DiskResize(nil), c.contract.resizes...) }

func (c *Cluster) diskResizeOf(pvc *corev1.PersistentVolumeClaim, to resource.Quantity) DiskResize {
	d := DiskResize{Time: c.now, Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, From: pvc.Spec.Resources.Requests[corev1.ResourceStorage], To: to,
		FleetUID: types.UID(pvc.Labels[kinds.LabelFleetUID]), FleetName: pvc.Labels[kinds.LabelInstance]}
	if f := c.fleet(pvc.Namespace, d.FleetName); f != nil && f.UID == d.FleetUID {
		d.FleetExists = true
		if st := f.Spec.Storage; st != nil {
			d.FleetSize = st.Size
		}
	}
	return d
}

// RecordedEvent is a Kubernetes Event the operator recorded.
type RecordedEvent struct {
	Time      time.Time
	Key       string
	Namespace string
	Name      string
	Type      string
	Reason    string
	Message   string
}

type contract struct {
	replicas []ReplicaWrite
	pods     []PodDeletion
	disks    []DiskDeletion
	resizes  []DiskResize
	// partitions are the writes of StatefulSets of fleets that stage their rollouts.
	partitions []PartitionWrite
	stops      []WorkloadStop
}

// WorkloadStops lists the operator's deletes of workloads with propagation Background, in order.
func (c *Cluster) WorkloadStops() []WorkloadStop {
	return append([]WorkloadStop(nil), c.contract.stops...)
}

// Requests lists every request the operator sent through Do, in order, failed ones included.
func (c *Cluster) Requests() []Request { return append([]Request(nil), c.requests...) }

// RequestCount is how many requests the operator sent through Do so far.
func (c *Cluster) RequestCount() int { return len(c.requests) }

// RequestsFrom lists the requests the operator sent through Do from the i-th on, in order.
func (c *Cluster) RequestsFrom(i int) []Request {
	return append([]Request(nil), c.requests[min(i, len(c.requests)):]...)
}

// Writes lists the requests that changed the cluster: what a converged operator must not send.
func (c *Cluster) Writes() []Request {
	var out []Request
	for _, r := range c.requests {
		if r.Changed && r.Err == nil {
			out = append(out, r)
		}
	}
	return out
}

// ReplicaWrites lists the operator's writes of workload replicas, in order.
func (c *Cluster) ReplicaWrites() []ReplicaWrite {
	return append([]ReplicaWrite(nil), c.contract.replicas...)
}

// PodDeletions lists the operator's accepted Pod deletions, in order.
func (c *Cluster) PodDeletions() []PodDeletion { return append([]PodDeletion(nil), c.contract.pods...) }

// DiskDeletions lists the operator's accepted claim deletions, in order.
func (c *Cluster) DiskDeletions() []DiskDeletion {
	return append([]DiskDeletion(nil), c.contract.disks...)
}

// Events lists the Kubernetes Events the operator recorded, in order.
func (c *Cluster) Events() []RecordedEvent { return append([]RecordedEvent(nil), c.recorded...) }

// workloadState is what a replica write is judged against: whether the workload's last change
// rolled out, and the state of its fleet's members.
type workloadState struct {
	exists        bool
	replicas      int32
	rolledOut     bool
	notReady      int
	cordoned      int
	members       int
	fleetUID      types.UID
	fleetDeleting bool
}

func (c *Cluster) workloadStateOf(k Kind, namespace, name string) workloadState {
	obj := c.get(k, namespace, name)
	if obj == nil {
		return workloadState{}
	}
	ws := workloadState{exists: true, fleetUID: types.UID(obj.GetLabels()[kinds.LabelFleetUID])}
	var observed, generation int64
	var st, ready, updated int32
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		ws.replicas = int32(specReplicas(o.Spec.Replicas))
		observed, generation, st, ready, updated = o.Status.ObservedGeneration, o.Generation, o.Status.Replicas, o.Status.ReadyReplicas, o.Status.UpdatedReplicas
	case *appsv1.Deployment:
		ws.replicas = int32(specReplicas(o.Spec.Replicas))
		observed, generation, st, ready, updated = o.Status.ObservedGeneration, o.Generation, o.Status.Replicas, o.Status.ReadyReplicas, o.Status.UpdatedReplicas
	}
	anyTerminating := false
	for _, p := range c.members(namespace, ws.fleetUID, obj) {
		ws.members++
		if terminating(p) {
			anyTerminating = true
		}
		if unavailable(p) {
			ws.notReady++
		}
		if n := c.node(p.Spec.NodeName); n != nil && n.Spec.Unschedulable && !terminating(p) {
			ws.cordoned++
		}
	}
	// A staged rollout held at its partition has rolled out as far as it goes.
	held := false
	if s, ok := obj.(*appsv1.StatefulSet); ok && updated != ws.replicas {
		held = c.heldRolledOut(s)
	}
	ws.rolledOut = observed == generation && st == ws.replicas && (updated == ws.replicas || held) && ready == ws.replicas && !anyTerminating
	if f, ok := c.byUID[ws.fleetUID].(*v1alpha1.CelldFleet); ok {
		ws.fleetDeleting = f.DeletionTimestamp != nil
	}
	return ws
}

// members lists a fleet's Pods by its UID label, or, for a workload without the label, the Pods
// it controls.
func (c *Cluster) members(namespace string, fleetUID types.UID, owner object) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range c.pods() {
		if p.Namespace != namespace {
			continue
		}
		if fleetUID != "" && p.Labels[kinds.LabelFleetUID] == string(fleetUID) {
			out = append(out, p)
		} else if fleetUID == "" && owner != nil && controlledBy(p, owner) {
			out = append(out, p)
		}
	}
	return out
}

func (c *Cluster) recordReplicaWrite(k Kind, before workloadState, res applied) {
	after := c.workloadStateOf(k, res.stored.GetNamespace(), res.stored.GetName())
	if before.exists && before.replicas == after.replicas {
		return
	}
	w := ReplicaWrite{Time: c.now, Kind: k, Namespace: res.stored.GetNamespace(), Name: res.stored.GetName(),
		FleetUID: after.fleetUID, Created: !before.exists, From: before.replicas, To: after.replicas,
		PrevRolledOut: before.exists && before.rolledOut, NotReady: before.notReady, Cordoned: before.cordoned, Members: before.members,
		FleetDeleting: before.fleetDeleting || after.fleetDeleting}
	if !before.exists && after.fleetUID != "" {
		// A workload created over members that outlived the last one: they are what it starts
		// from (the ones not terminating). A StatefulSet counts its members by ordinal: one
		// past the highest of them is the size they make up, and a lower ordinal missing is a
		// member being replaced (healed while no workload stood), which the set brings back.
		set, _ := res.stored.(*appsv1.StatefulSet)
		past := 0
		for _, p := range c.members(w.Namespace, after.fleetUID, nil) {
			if terminating(p) {
				continue
			}
			w.Members++
			if set != nil {
				past = max(past, setOrdinal(set, p.Name)+1)
			}
		}
		w.Members = max(w.Members, past)
	}
	c.contract.replicas = append(c.contract.replicas, w)
}

func (c *Cluster) podDeletionOf(p *corev1.Pod, a machine.Action) PodDeletion {
	uid := types.UID(p.Labels[kinds.LabelFleetUID])
	d := PodDeletion{Time: c.now, Namespace: p.Namespace, Name: p.Name, UID: p.UID, Preconditioned: a.UID != "",
		Force: a.Force, Reason: a.Reason, FleetUID: uid, Node: p.Spec.NodeName, NodeState: c.nodeState(p.Spec.NodeName),
		WasReady: podReady(p), WasTerminating: terminating(p), NodeFenced: c.nodeFenced(p.Spec.NodeName)}
	if d.NodeState != NodeReady && d.NodeState != NodeNone {
		d.NodeUnhealthySince = c.nodeUnhealthySince(p.Spec.NodeName)
	}
	d.ClaimLost = c.claimLost(p)
	d.RevisionBehind = c.revisionBehind(p)
	d.Deployment = p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != ""
	d.NotReadySince = p.CreationTimestamp.Time
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			d.NotReadySince = cond.LastTransitionTime.Time
		}
	}
	d.Grace = 5 * time.Minute
	if f, ok := c.byUID[uid].(*v1alpha1.CelldFleet); ok {
		d.FleetDeleting = f.DeletionTimestamp != nil
		if g := f.Spec.Healing.UnreachableGracePeriod; g != nil {
			d.Grace = g.Duration
		}
	}
	for _, q := range c.members(p.Namespace, uid, nil) {
		if q.UID != p.UID && unavailable(q) {
			d.OtherNotReady++
		}
	}
	return d
}

func (c *Cluster) diskDeletionOf(pvc *corev1.PersistentVolumeClaim, a machine.Action) DiskDeletion {
	d := DiskDeletion{Time: c.now, Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, Preconditioned: a.UID != "",
		FleetUID: types.UID(pvc.Labels[kinds.LabelFleetUID]), FleetName: pvc.Labels[kinds.LabelInstance]}
	if f := c.fleet(pvc.Namespace, d.FleetName); f != nil && f.UID == d.FleetUID {
		d.FleetExists, d.FleetDeleting, d.FleetProfile = true, f.DeletionTimestamp != nil, f.Spec.Profile
	}
	if d.FleetUID != "" {
		d.MemberPods = len(c.members(pvc.Namespace, d.FleetUID, nil))
	}
	return d
}
