package events

import (
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/reservation"
)

// View is one fleet as the lifecycle machine sees it: normalized, sorted, and free of anything the
// machine does not decide on. The same observation always gives the same View.
type View struct {
	Now       time.Time
	Namespace string
	Name      string
	// Fleet is nil when the fleet does not exist (deleted and its finalizer gone).
	Fleet *v1alpha1.CelldFleet
	// Deleting is true once deletion was requested.
	Deleting     bool
	HasFinalizer bool
	// Asleep: the fleet's PodDisruptionBudget carries AnnotationHibernated, the operator's
	// record that it stopped the fleet's members for spec.hibernate and has not seen them all
	// ready again since. It outlives the workload, which hibernation deletes.
	Asleep bool
	// AsleepStopped: the mark says every member had stopped (value "stopped"), where the
	// operator saw no workload and no member left.
	AsleepStopped bool

	Reservation ReservationView
	Workload    WorkloadView
	// Members are the fleet's Pods, sorted by ordinal then name.
	Members []Member
	// Disks are the claims that carry the fleet's name label or are named as its StatefulSet names
	// its claims (ClaimName), whatever their labels, sorted by name.
	Disks []Disk
	Nodes map[string]NodeView
	// NodesSynced is false until the node cache synced; a missing node then proves nothing.
	NodesSynced bool

	Owned Owned

	StorageClassMissing bool
	// StorageClassFixed: the fleet's storage class exists and does not allow its claims to grow
	// (allowVolumeExpansion is not true).
	StorageClassFixed     bool
	ServiceAccountMissing bool
	PriorityClassMissing  bool
	// Unowned names (Kind/name) the objects under the fleet's derived names, and the reservation
	// under the name the fleet would create, that exist and are not the fleet's.
	Unowned []string
	// Uninstalling: the fleet is deleted because its CustomResourceDefinition is (the operator is
	// being uninstalled), not because someone deleted the fleet. Its disks are then kept.
	Uninstalling bool
	Utilization  *Utilization
	// Refused is the API server's refusal of an object rendered from this generation of the spec.
	Refused *Refusal
	// Fingerprint identifies everything a decision reads from the view but Now. Normalize
	// computes it once per observation, where it walks every member anyway, so that deciding on a
	// fleet whose view did not change is one comparison however many members it has. Zero means
	// not computed; a view changed after Normalize must set it to zero.
	Fingerprint uint64
}

// ReservationView is the reservation of the fleet's bucket, whichever fleet it binds.
type ReservationView struct {
	Exists bool
	Name   string
	// BoundTo is the UID the reservation binds the bucket to.
	BoundTo types.UID
	// BoundName is the name of the fleet the reservation binds the bucket to.
	BoundName      string
	BoundNamespace string
	History        []v1alpha1.CapacityDecision
	// Conflicts counts reservations of the same bucket beyond the first (made by hand).
	Conflicts int
	// Claimant is the rival fleet with a stronger claim to the bucket, nil when none: with no
	// reservation (deleted by hand mid-life), only the fleet with the strongest claim binds it.
	Claimant *Claimant
}

// Claimant is another fleet that names the same bucket.
type Claimant struct {
	Namespace, Name string
	UID             types.UID
}

// WorkloadView summarizes the StatefulSet or Deployment that runs the members.
type WorkloadView struct {
	Exists             bool
	UID                types.UID
	ResourceVersion    string
	Replicas           int32
	Generation         int64
	ObservedGeneration int64
	StatusReplicas     int32
	ReadyReplicas      int32
	UpdatedReplicas    int32
	// UpdateRevision is the revision new members get (StatefulSet only).
	UpdateRevision string
	// CurrentRevision is the revision the members not yet updated run (StatefulSet only); equal
	// to UpdateRevision once a rollout completed.
	CurrentRevision string
	// Partition is the StatefulSet's rollingUpdate partition: members at ordinals from it up
	// are updated, the ones below keep their revision (a staged rollout holds there).
	Partition int32
	// Settled is the size whose rollout last completed (AnnotationSettled), -1 when never.
	Settled int32
	// FilesystemResize is the Pod template's v1alpha1.AnnotationFilesystemResize.
	FilesystemResize string
	// Deleting: the StatefulSet carries a deletionTimestamp (deleted with propagation Orphan, it
	// stays until the garbage collector has orphaned its members).
	Deleting bool
	// ClaimSize is the size the StatefulSet's claim template asks for, zero when it has none.
	// The template is immutable: the workload is created again to change it.
	ClaimSize resource.Quantity
}

// Member is one of the fleet's Pods.
type Member struct {
	Name            string
	UID             types.UID
	ResourceVersion string
	// Ordinal is the StatefulSet ordinal, -1 for a Deployment's Pod.
	Ordinal     int
	NodeName    string
	Ready       bool
	Terminating bool
	// Revision is the controller revision (StatefulSet) or template hash (Deployment).
	Revision string
	// NotReadySince is when the Pod's Ready condition last became false (creation if never true).
	NotReadySince time.Time
	// DeletionTime is the Pod's deletionTimestamp (the request time plus its grace period), zero
	// when not terminating.
	DeletionTime time.Time
	// ClaimName is the claim of the member's data volume, empty for a scratch disk.
	ClaimName string
	// FilesystemResize is the Pod's v1alpha1.AnnotationFilesystemResize, as its template had it.
	FilesystemResize string
	// Disruption is the reason of the Pod's DisruptionTarget condition while it is true (an
	// eviction through the Eviction API, a preemption, a taint's deletion): who is taking the
	// member away, and that it is not the operator. Empty when none.
	Disruption string
	// Unschedulable is the scheduler's message while it finds no node for the Pod, empty when
	// the Pod is placed or not yet tried.
	Unschedulable string
	// Orphan: the Pod has no controller. A StatefulSet deleted with propagation Orphan takes its
	// reference off its Pods before it goes; one deleted with propagation Background leaves it,
	// and the garbage collector deletes them.
	Orphan bool
}

// DisruptionEviction is the DisruptionTarget reason of a Pod evicted through the Eviction API,
// as a drain evicts.
const DisruptionEviction = "EvictionByEvictionAPI"

// Disk is one claim that carries the fleet's name label.
type Disk struct {
	Name            string
	UID             types.UID
	ResourceVersion string
	FleetUID        types.UID
	// Ordinal is the member ordinal the claim belongs to, -1 unless the name is exactly
	// ClaimName(fleet, ordinal).
	Ordinal     int
	Lost        bool
	Terminating bool
	// Requested is the claim's spec.resources.requests.storage, Capacity its
	// status.capacity.storage (zero until provisioned).
	Requested, Capacity resource.Quantity
	// Resize is what holds a resize on its way (ResizeExpanding, ResizeFileSystemPending,
	// ResizeFailed), empty when none; ResizeMessage is what the claim says of it.
	Resize        string
	ResizeMessage string
	// ResizePendingSince is when the claim's FileSystemResizePending condition last turned true:
	// the kubelet grows a mounted volume's filesystem while its member runs, when the driver can.
	// Zero when the claim says no time.
	ResizePendingSince time.Time
	// NodeResizeFailed: the kubelet tried to grow the filesystem and failed (condition
	// NodeResizeError, which it retries), as a driver that grows only an unmounted filesystem
	// answers while its member runs.
	NodeResizeFailed bool
	// Node is the node the scheduler chose for the claim's volume (the claim's selected-node
	// annotation, set for a volume provisioned where its first member was placed): a node-local
	// disk binds its member to that node. Empty when not known.
	Node string
}

// AnnotationSelectedNode is the annotation the scheduler puts on a claim whose volume waits for
// its first consumer: the node the volume is provisioned for.
const AnnotationSelectedNode = "volume.kubernetes.io/selected-node"

// What a claim says of a resize on its way.
const (
	// ResizeExpanding: the volume is being expanded (the Resizing condition, or a controller
	// expansion in progress).
	ResizeExpanding = "Resizing"
	// ResizeFileSystemPending: the volume is expanded, the filesystem on it not yet; the kubelet
	// grows it while the volume is mounted if the driver can, or when its member starts again.
	ResizeFileSystemPending = "FileSystemResizePending"
	// ResizeFailed: the expansion failed (an error condition, or the resizer found it
	// infeasible).
	ResizeFailed = "ExpansionFailed"
)

// NodeView is a node's health as far as healing cares.
type NodeView struct {
	Ready bool
	// UnhealthySince is when the node stopped being Ready (or became unreachable).
	UnhealthySince time.Time
	// Fenced: the node carries the out-of-service taint, someone's word that the machine is
	// powered off or cut off from its disks (non-graceful node shutdown). NotReady alone is not:
	// a partitioned node still runs its Pods.
	Fenced bool
	// Cordoned: the node is marked unschedulable, as a drain does first; its members are being
	// or may be evicted, and nothing new is placed on it until it is uncordoned.
	Cordoned bool
}

// Owned holds the observed objects the fleet owns, for drift comparison. They are the caches'
// objects: never modified.
type Owned struct {
	StatefulSet *appsv1.StatefulSet
	Deployment  *appsv1.Deployment
	Objects     []OwnedObject
}

// OwnedObject is an observed object of an owned kind that is not a workload.
type OwnedObject struct {
	Kind            kinds.Kind
	Name            string
	ResourceVersion string
	Object          any
}

// Twin is the observed object of that kind and name the fleet owns, with its resourceVersion;
// nil when there is none.
func (o *Owned) Twin(kind kinds.Kind, name string) (any, string) {
	if s := o.StatefulSet; s != nil && kind == kinds.StatefulSet && s.Name == name {
		return s, s.ResourceVersion
	}
	if d := o.Deployment; d != nil && kind == kinds.Deployment && d.Name == name {
		return d, d.ResourceVersion
	}
	for i := range o.Objects {
		if x := &o.Objects[i]; x.Kind == kind && x.Name == name {
			return x.Object, x.ResourceVersion
		}
	}
	return nil, ""
}

// Key returns the namespace/name key of the fleet.
func (v *View) Key() string { return v.Namespace + "/" + v.Name }

// Normalize folds an observation into the View the machine decides on.
func Normalize(namespace, name string, o *Observation) View {
	v := View{Now: o.Now, Namespace: namespace, Name: name, Fleet: o.Fleet, NodesSynced: o.NodesSynced, Utilization: o.Utilization}
	if o.Fleet == nil {
		return v
	}
	f := o.Fleet
	if u := o.Utilization; u != nil && !u.Unavailable && u.Time.Before(f.CreationTimestamp.Time) {
		// Samples are kept by the fleet's name: one taken before this fleet existed measured an
		// earlier fleet of the same name, deleted since.
		v.Utilization = nil
	}
	v.Deleting = f.DeletionTimestamp != nil
	v.HasFinalizer = reservation.HasFinalizer(f)
	v.Reservation = reservationView(f, o.Reservations)
	if !v.Reservation.Exists {
		v.Reservation.Claimant = claimant(f, o.Rivals)
	}
	v.Workload = workloadView(o)
	v.Owned = Owned{StatefulSet: o.StatefulSet, Deployment: o.Deployment}
	for _, x := range o.Owned {
		v.Owned.Objects = append(v.Owned.Objects, OwnedObject{Kind: kinds.Of(x), Name: x.GetName(), ResourceVersion: x.GetResourceVersion(), Object: x})
	}
	for _, x := range o.Owned {
		if kinds.Of(x) == kinds.PodDisruptionBudget && x.GetName() == f.Name && x.GetAnnotations()[kinds.AnnotationHibernated] != "" {
			v.Asleep = true
			v.AsleepStopped = x.GetAnnotations()[kinds.AnnotationHibernated] == kinds.HibernatedStopped
		}
	}
	sort.Slice(v.Owned.Objects, func(i, j int) bool {
		a, b := v.Owned.Objects[i], v.Owned.Objects[j]
		return a.Kind < b.Kind || (a.Kind == b.Kind && a.Name < b.Name)
	})
	v.Members = members(f, o)
	v.Disks = disks(f, o.PVCs)
	v.Nodes = nodes(o.Nodes)
	v.StorageClassMissing = f.Spec.Profile == v1alpha1.ProfilePersistentFleet && o.StorageClassKnown && o.StorageClass == nil
	v.StorageClassFixed = f.Spec.Profile == v1alpha1.ProfilePersistentFleet && o.StorageClass != nil &&
		(o.StorageClass.AllowVolumeExpansion == nil || !*o.StorageClass.AllowVolumeExpansion)
	v.ServiceAccountMissing = o.ServiceAccountMissing
	v.PriorityClassMissing = o.PriorityClassMissing
	v.Unowned = o.Unowned
	v.Uninstalling = v.Deleting && o.Uninstalling
	if r := o.Refused; r != nil && r.Generation == f.Generation {
		v.Refused = r
	}
	v.Fingerprint = fingerprint(&v)
	return v
}

func reservationView(f *v1alpha1.CelldFleet, rs []*v1alpha1.CelldReservation) ReservationView {
	var rv ReservationView
	first, others := reservation.Binding(f, rs)
	if first == nil {
		return rv
	}
	rv.Conflicts = others
	rv.Exists = true
	rv.Name = first.Name
	rv.BoundTo = first.Spec.FleetUID
	rv.BoundName = first.Spec.FleetName
	rv.BoundNamespace = first.Namespace
	rv.History = first.Status.CapacityHistory
	return rv
}

func claimant(f *v1alpha1.CelldFleet, rivals []*v1alpha1.CelldFleet) *Claimant {
	best := reservation.Strongest(f, rivals)
	if best == nil {
		return nil
	}
	return &Claimant{Namespace: best.Namespace, Name: best.Name, UID: best.UID}
}

// RolledOut: the workload's controller has acted on its latest spec and every replica it asks
// for exists, runs that spec and is ready, by the workload's own status. A staged rollout held
// at its partition has rolled out as far as it goes: every member from the partition up is
// updated. That leniency holds only while the current and update revisions differ: once they
// are one again (a revert), members below the partition run it already, so only every member
// on it counts.
func (w WorkloadView) RolledOut() bool {
	updated := w.UpdatedReplicas == w.Replicas ||
		(w.CurrentRevision != w.UpdateRevision && w.UpdatedReplicas >= w.Replicas-min(w.Partition, w.Replicas))
	return w.Exists && w.ObservedGeneration >= w.Generation && w.StatusReplicas == w.Replicas &&
		updated && w.ReadyReplicas == w.Replicas
}

// Held: a staged rollout holds at the partition, by the workload's status: the controller acted
// on the latest spec, and the members below the partition keep a revision the update has not
// reached. The operator's own status says nothing here: this is observation alone.
func (w WorkloadView) Held() bool {
	return w.Exists && w.Partition > 0 && w.ObservedGeneration >= w.Generation && w.UpdateRevision != "" &&
		w.CurrentRevision != w.UpdateRevision && w.UpdatedReplicas < w.Replicas
}

// HeldOverOthers: a StatefulSet created anew, with a partition, over members an earlier one
// made. Its controller takes its update revision for the current one, so its status cannot tell
// the members below the partition, which keep the earlier template, from members still to update:
// by the status alone the set never rolls out, nor holds. Only the members' own revisions can
// tell the two apart (the machine's facts read them).
func (w WorkloadView) HeldOverOthers() bool {
	return w.Exists && w.Partition > 0 && w.ObservedGeneration >= w.Generation && w.UpdateRevision != "" &&
		w.CurrentRevision == w.UpdateRevision && w.UpdatedReplicas < w.Replicas &&
		w.StatusReplicas == w.Replicas && w.ReadyReplicas == w.Replicas
}

// WorkloadOf summarizes a StatefulSet or a Deployment; anything else is no workload.
func WorkloadOf(obj any) WorkloadView {
	o := &Observation{}
	switch w := obj.(type) {
	case *appsv1.StatefulSet:
		o.StatefulSet = w
	case *appsv1.Deployment:
		o.Deployment = w
	}
	return workloadView(o)
}

func workloadView(o *Observation) WorkloadView {
	if s := o.StatefulSet; s != nil {
		w := WorkloadView{Exists: true, UID: s.UID, ResourceVersion: s.ResourceVersion, Generation: s.Generation, ObservedGeneration: s.Status.ObservedGeneration,
			StatusReplicas: s.Status.Replicas, ReadyReplicas: s.Status.ReadyReplicas, UpdatedReplicas: s.Status.UpdatedReplicas,
			UpdateRevision: s.Status.UpdateRevision, CurrentRevision: s.Status.CurrentRevision, Settled: settled(s.Annotations)}
		w.Replicas = replicas(s.Spec.Replicas)
		if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
			w.Partition = *ru.Partition
		}
		w.FilesystemResize = s.Spec.Template.Annotations[v1alpha1.AnnotationFilesystemResize]
		w.Deleting = s.DeletionTimestamp != nil
		for _, t := range s.Spec.VolumeClaimTemplates {
			if t.Name == kinds.DataVolume {
				w.ClaimSize = t.Spec.Resources.Requests[corev1.ResourceStorage]
			}
		}
		return w
	}
	if d := o.Deployment; d != nil {
		w := WorkloadView{Exists: true, UID: d.UID, ResourceVersion: d.ResourceVersion, Generation: d.Generation, ObservedGeneration: d.Status.ObservedGeneration,
			StatusReplicas: d.Status.Replicas, ReadyReplicas: d.Status.ReadyReplicas, UpdatedReplicas: d.Status.UpdatedReplicas,
			Settled: settled(d.Annotations)}
		w.Replicas = replicas(d.Spec.Replicas)
		return w
	}
	return WorkloadView{Settled: -1}
}

func settled(annotations map[string]string) int32 {
	n, err := strconv.ParseInt(annotations[kinds.AnnotationSettled], 10, 32)
	if err != nil || n < 0 {
		return -1
	}
	return int32(n)
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func members(f *v1alpha1.CelldFleet, o *Observation) []Member {
	out := make([]Member, 0, len(o.Pods))
	for _, p := range o.Pods {
		if p.Labels[kinds.LabelFleetUID] != string(f.UID) {
			continue
		}
		m := Member{Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion, NodeName: p.Spec.NodeName, Ordinal: -1,
			NotReadySince: p.CreationTimestamp.Time, FilesystemResize: p.Annotations[v1alpha1.AnnotationFilesystemResize],
			Orphan: metav1.GetControllerOfNoCopy(p) == nil}
		switch {
		case o.StatefulSet != nil:
			m.Ordinal = ordinal(p.Name, o.StatefulSet.Name)
			m.Revision = p.Labels[appsv1.StatefulSetRevisionLabel]
		case o.Deployment == nil && (f.Spec.Profile == v1alpha1.ProfilePersistentFleet || f.Spec.Workload == v1alpha1.WorkloadOrderedStatefulSet):
			// A StatefulSet deleted with propagation Orphan left its members: they keep the
			// ordinals of the set the fleet names after itself, until it is created again.
			m.Ordinal = ordinal(p.Name, f.Name)
			m.Revision = p.Labels[appsv1.StatefulSetRevisionLabel]
		default:
			m.Revision = p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		}
		if p.DeletionTimestamp != nil {
			m.Terminating = true
			m.DeletionTime = p.DeletionTimestamp.Time
		}
		for _, c := range p.Status.Conditions {
			switch {
			case c.Type == corev1.PodReady:
				m.Ready = c.Status == corev1.ConditionTrue
				if !m.Ready && !c.LastTransitionTime.IsZero() {
					m.NotReadySince = c.LastTransitionTime.Time
				}
			case c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue:
				m.Disruption = orDefault(c.Reason, "DisruptionTarget")
			case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && p.Spec.NodeName == "":
				m.Unschedulable = orDefault(c.Message, "no node fits")
			}
		}
		for _, vol := range p.Spec.Volumes {
			if vol.Name == kinds.DataVolume && vol.PersistentVolumeClaim != nil {
				m.ClaimName = vol.PersistentVolumeClaim.ClaimName
			}
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Ordinal != out[j].Ordinal {
			return out[i].Ordinal < out[j].Ordinal
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func orDefault(s, alt string) string {
	if s != "" {
		return s
	}
	return alt
}

// ordinal parses the ordinal of a Pod or claim named "<prefix>-<ordinal>", -1 when it has none.
func ordinal(name, prefix string) int {
	if !strings.HasPrefix(name, prefix+"-") {
		return -1
	}
	n, err := strconv.Atoi(name[len(prefix)+1:])
	if err != nil || n < 0 || strconv.Itoa(n) != name[len(prefix)+1:] {
		return -1
	}
	return n
}

func disks(f *v1alpha1.CelldFleet, pvcs []*corev1.PersistentVolumeClaim) []Disk {
	out := make([]Disk, 0, len(pvcs))
	for _, c := range pvcs {
		ord := -1
		if fleet, n, ok := kinds.ClaimFleet(c.Name); ok && fleet == f.Name {
			ord = n
		}
		d := Disk{Name: c.Name, UID: c.UID, ResourceVersion: c.ResourceVersion,
			FleetUID: types.UID(c.Labels[kinds.LabelFleetUID]), Ordinal: ord,
			Lost: c.Status.Phase == corev1.ClaimLost, Terminating: c.DeletionTimestamp != nil,
			Requested: c.Spec.Resources.Requests[corev1.ResourceStorage], Capacity: c.Status.Capacity[corev1.ResourceStorage]}
		d.Resize, d.ResizeMessage = resizeOf(c)
		for _, cd := range c.Status.Conditions {
			switch {
			case cd.Status != corev1.ConditionTrue:
			case cd.Type == corev1.PersistentVolumeClaimFileSystemResizePending && d.Resize == ResizeFileSystemPending:
				d.ResizePendingSince = cd.LastTransitionTime.Time
			case cd.Type == corev1.PersistentVolumeClaimNodeResizeError:
				d.NodeResizeFailed = true
			}
		}
		d.Node = c.Annotations[AnnotationSelectedNode]
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func nodes(in map[string]*corev1.Node) map[string]NodeView {
	out := make(map[string]NodeView, len(in))
	for name, n := range in {
		out[name] = NodeHealth(n)
	}
	return out
}

// NodeHealth is a node's health as healing sees it: Ready, unless its Ready condition says
// otherwise or it carries the unreachable or out-of-service taint, and since when it is not.
func NodeHealth(n *corev1.Node) NodeView {
	nv := NodeView{Ready: false, UnhealthySince: n.CreationTimestamp.Time, Cordoned: n.Spec.Unschedulable}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			nv.Ready = c.Status == corev1.ConditionTrue
			nv.UnhealthySince = c.LastTransitionTime.Time
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeOutOfService {
			nv.Fenced = true
		}
		if (t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeOutOfService) && nv.Ready {
			nv.Ready = false
			if t.TimeAdded != nil {
				nv.UnhealthySince = t.TimeAdded.Time
			}
		}
	}
	return nv
}

// PodReady reports whether a Pod is ready and not terminating.
func PodReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// resizeOf reads what holds a claim's resize: a failure first (it needs a person), then a
// filesystem waiting for its node, then an expansion in progress.
func resizeOf(c *corev1.PersistentVolumeClaim) (string, string) {
	var expanding, pending string
	found := false
	for _, cd := range c.Status.Conditions {
		if cd.Status != corev1.ConditionTrue {
			continue
		}
		switch cd.Type {
		case corev1.PersistentVolumeClaimControllerResizeError, corev1.PersistentVolumeClaimNodeResizeError:
			return ResizeFailed, conditionText(cd)
		case corev1.PersistentVolumeClaimFileSystemResizePending:
			pending, found = conditionText(cd), true
		case corev1.PersistentVolumeClaimResizing:
			expanding = conditionText(cd)
		}
	}
	switch c.Status.AllocatedResourceStatuses[corev1.ResourceStorage] {
	case corev1.PersistentVolumeClaimControllerResizeInfeasible, corev1.PersistentVolumeClaimNodeResizeInfeasible:
		return ResizeFailed, "the resizer found the expansion infeasible (status.allocatedResourceStatuses: " +
			string(c.Status.AllocatedResourceStatuses[corev1.ResourceStorage]) + ")"
	case corev1.PersistentVolumeClaimNodeResizePending, corev1.PersistentVolumeClaimNodeResizeInProgress:
		if !found {
			pending, found = "the volume is expanded; its filesystem is yet to grow on the node", true
		}
	case corev1.PersistentVolumeClaimControllerResizeInProgress:
		if expanding == "" {
			expanding = "the volume is being expanded"
		}
	}
	switch {
	case found:
		return ResizeFileSystemPending, pending
	case expanding != "":
		return ResizeExpanding, expanding
	}
	return "", ""
}

func conditionText(c corev1.PersistentVolumeClaimCondition) string {
	if c.Message != "" {
		return c.Message
	}
	if c.Reason != "" {
		return c.Reason
	}
	return string(c.Type)
}
