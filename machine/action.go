package machine

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// ActionKind names what an action asks a driver to do.
type ActionKind string

// The actions. Every one is idempotent: applying it twice, or applying it once it already holds,
// changes nothing more.
const (
	// Apply server-side applies Object (a typed object with its TypeMeta set) with the operator's
	// field manager.
	Apply ActionKind = "Apply"
	// BindReservation creates Object (a *v1alpha1.CelldReservation); AlreadyExists bound to the
	// same fleet UID is success, bound to another is a refusal to report.
	BindReservation ActionKind = "BindReservation"
	// AppendHistory appends Decisions, oldest first, to the reservation Name's capacity history
	// in one write with optimistic concurrency; a history that already ends with them is success.
	AppendHistory ActionKind = "AppendHistory"
	// AddFinalizer and RemoveFinalizer edit the fleet's finalizers.
	AddFinalizer    ActionKind = "AddFinalizer"
	RemoveFinalizer ActionKind = "RemoveFinalizer"
	// DeletePod deletes Pod Name with UID and ResourceVersion preconditions; Force sets a zero
	// grace period, and only ever with a premise that the Pod's node is gone or fenced. Only
	// Healing emits it.
	DeletePod ActionKind = "DeletePod"
	// DeleteDisk deletes PersistentVolumeClaim Name with UID and ResourceVersion preconditions.
	// Only Deleting emits it, and only for a claim under the fleet's exact claim name that
	// carries the fleet's UID label.
	DeleteDisk ActionKind = "DeleteDisk"
	// ResizeDisk raises PersistentVolumeClaim Name's storage request to Size, with its UID as a
	// precondition. Only for a claim under the fleet's exact claim name that carries the fleet's
	// UID label, and only upward: a claim that asks for Size or more already is left as it is.
	// Expanding the volume and its filesystem is the resizer's and the kubelet's.
	ResizeDisk ActionKind = "ResizeDisk"
	// RecreateWorkload deletes StatefulSet Name with propagation Orphan and UID and
	// ResourceVersion preconditions: its members, their claims and its revisions stay, and the
	// next step creates it again from the spec, with the claim template of the new size (a
	// StatefulSet's claim templates are immutable). The new StatefulSet adopts the members at the
	// revision they run: no member restarts.
	RecreateWorkload ActionKind = "RecreateWorkload"
	// StopWorkload deletes the workload Name (StatefulSet or Deployment, by Ref.Kind) with
	// propagation Background and a UID precondition: the garbage collector then stops every
	// member at once, where the workload's own scale-down (OrderedReady) would stop one at a
	// time, each step waiting for the others to be ready. The claims, which the StatefulSet
	// retains (Retain/Retain, no owner), the Services, policies, budget and reservation stay.
	// Only hibernation (spec.hibernate) emits it, with a premise on the fleet's generation.
	StopWorkload ActionKind = "StopWorkload"
	// PublishStatus writes Status through the status subresource.
	PublishStatus ActionKind = "PublishStatus"
	// RecordEvent records a Kubernetes Event on the fleet.
	RecordEvent ActionKind = "RecordEvent"
	// Requeue asks to be stepped again After a duration, even if nothing is observed.
	Requeue ActionKind = "Requeue"
)

// Action is one effect the machine asks for, as plain data.
type Action struct {
	Kind ActionKind
	// Key is stable for the same effect on the same object: drivers and tests use it to
	// recognize a repeat.
	Key string
	// Ref is the object the action is about (the fleet for a finalizer, a status, an event or a
	// requeue). Its Kind is the object's; the action's own is Action.Kind.
	kinds.Ref
	// Object is the content to apply or create.
	Object any
	// UID and ResourceVersion are preconditions of a delete. An Apply's UID is set by the
	// driver's owner check (loop.Check), never by the machine: the UID of the object the check
	// read, which the write carries so that it never lands on an object made since.
	UID             types.UID
	ResourceVersion string
	Force           bool
	// Reason is why: a heal reason, an event reason.
	Reason string
	// Size is the storage a ResizeDisk asks for.
	Size resource.Quantity
	// Decisions are the capacity records one step appends, oldest first, in one write.
	Decisions []v1alpha1.CapacityDecision
	Status    *v1alpha1.CelldFleetStatus
	// EventType is Normal or Warning; Message is the event's text.
	EventType string
	Message   string
	After     time.Duration
	// Premise is what a heal or a workload write was decided on; nil for others.
	Premise *Premise
}

// ErrPremiseChanged is returned (wrapped) by a driver that refused an action because its premise
// no longer holds: the fleet is stepped again on what is observed now.
var ErrPremiseChanged = errors.New("the premise of the action no longer holds")

// Premise is what a heal or a workload write was decided on. Caches lag behind the API server,
// so just before acting the driver confirms the premise against fresh reads, and refuses the
// action when it no longer holds: a lagging cache must never cost a member, nor move a
// workload's size by more than the one step the decision meant.
type Premise struct {
	// Node, when set, must still be gone (NodeGone), or not ready since no later than
	// NodeUnhealthySince, and still fenced (NodeFenced): a taint taken back means the machine
	// may run the member again.
	Node               string
	NodeGone           bool
	NodeFenced         bool
	NodeUnhealthySince time.Time
	// Ready names member Pods that must still exist, be ready and not be terminating.
	Ready []string
	// Nodes are the nodes the decision saw the fleet's members on. The premise asks nothing of
	// them that Ready does not: a driver may read them at once, beside the members' list, rather
	// than after it (a member found on another node has its node read then).
	Nodes []string
	// FleetGeneration, when set, is the metadata.generation of the fleet named Fleet as the
	// decision saw it: a size the user asked for since must be decided on, not overwritten by
	// an older one.
	Fleet           string
	FleetGeneration int64
	// Workload, when true, asks for the workload (the StatefulSet or Deployment the action
	// writes, or the one WorkloadRef names for an action that writes something else) as the
	// decision saw it: existing or not (WorkloadExists), at WorkloadGeneration. A write from an
	// older view could take its replicas anywhere, and a heal decided on an older view could
	// take a member away while its controller has yet to act on a change.
	Workload           bool
	WorkloadExists     bool
	WorkloadGeneration int64
	WorkloadRef        kinds.Ref
	// RolledOut: the workload's last change must have rolled out by its status on the fresh read.
	// A scale-in takes a member away only after the previous change is done, and a cache behind
	// the workload's status (a member that crashed and came back since) must not make it look
	// done.
	RolledOut bool
	// Uncordoned: the node of every member Ready names must not be cordoned on the fresh read. A
	// drain cordons a node before it evicts, so a scale-in decided before a drain began is not
	// written once it has: an eviction and the scale-in would each take a member away.
	Uncordoned bool
	// Claim, when set, names a member's data claim that must still be missing, lost or being
	// deleted: a cache that has not seen the claim yet must not cost the member.
	Claim string
	// OnlyNotReady, when set, names the one member that may be not ready: every other member Pod
	// a fresh list finds, one the decision never saw included, must be ready.
	OnlyNotReady string
	// NoMembers: no Pod of the fleet may exist, terminating or not: a cache that has not seen a
	// member yet must not cost it its disk.
	NoMembers bool
	// DiskOf, when set, is the fleet UID the claim a DeleteDisk names must still carry in its
	// label, and DiskUID the claim's UID: it must still be the one decided on. Confirmed, the
	// delete carries the fresh read's resourceVersion, and is not sent for a claim that read
	// finds going already: a step on a cache that has not seen the deletes of the step before
	// (or a claim some controller touched since) costs no refused delete, no retry and no
	// second delete.
	DiskOf, DiskUID types.UID
	// DiskBelow, when set (a ResizeDisk), is the size the claim must still ask for less than:
	// a claim someone enlarged past it since the decision is never shrunk back.
	DiskBelow *resource.Quantity
}

// Fresh is what a driver read from the API server, not its caches, to confirm a premise.
type Fresh struct {
	// Node is the premise's node, nil when it does not exist.
	Node *corev1.Node
	// Pods are the fleet's member Pods by name.
	Pods map[string]*corev1.Pod
	// FleetGeneration is the fleet's metadata.generation, 0 when it does not exist.
	FleetGeneration int64
	// WorkloadExists and WorkloadGeneration are the workload's.
	WorkloadExists     bool
	WorkloadGeneration int64
	// WorkloadRolledOut: the workload's status says its last change rolled out
	// (events.WorkloadView.RolledOut).
	WorkloadRolledOut bool
	// Claim is the premise's claim, nil when it does not exist.
	Claim *corev1.PersistentVolumeClaim
	// Disk is the claim a DeleteDisk names, nil when it does not exist (read for DiskOf).
	Disk *corev1.PersistentVolumeClaim
	// Members counts the fleet's Pods (by its UID label), terminating ones included.
	Members int
	// MemberNodes are the nodes the Pods run on, by name; nil for a node that does not exist. A
	// Pod keeps saying Ready for a while after its node stops answering (until the node
	// lifecycle controller marks it): the node is what says whether the member still serves.
	MemberNodes map[string]*corev1.Node
}

// Mutating reports whether the action writes to the API server's objects (a Kubernetes Event is
// a write too; a requeue is not).
func (a Action) Mutating() bool { return a.Kind != Requeue }

// String renders the action as one stable line, for logs and golden files.
func (a Action) String() string {
	var b strings.Builder
	b.WriteString(string(a.Kind))
	b.WriteString(" ")
	b.WriteString(a.Key)
	switch a.Kind {
	case DeletePod:
		fmt.Fprintf(&b, " uid=%s force=%t reason=%s", a.UID, a.Force, a.Reason)
	case DeleteDisk, RecreateWorkload, StopWorkload:
		fmt.Fprintf(&b, " uid=%s", a.UID)
	case ResizeDisk:
		fmt.Fprintf(&b, " uid=%s size=%s", a.UID, a.Size.String())
	case AppendHistory:
		for _, d := range a.Decisions {
			fmt.Fprintf(&b, " %s %d->%d source=%s", d.Kind, d.From, d.To, d.Source)
		}
	case PublishStatus:
		if s := a.Status; s != nil {
			fmt.Fprintf(&b, " state=%s desired=%d current=%d ready=%d", s.State, s.Members.Desired, s.Members.Current, s.Members.Ready)
			if s.BlockedBy != "" {
				fmt.Fprintf(&b, " blockedBy=%q", s.BlockedBy)
			}
		}
	case RecordEvent:
		fmt.Fprintf(&b, " %s %s %q", a.EventType, a.Reason, a.Message)
	case Requeue:
		fmt.Fprintf(&b, " after=%s", a.After)
	}
	return b.String()
}
