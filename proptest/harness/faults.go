package harness

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

// The fault kinds of docs/guarantees.md's table, and the other disturbances of a sequence.
// A property run counts how often each occurred; every one must occur.
const (
	FaultBrokenRollout       = "broken rollout (an image that never becomes ready)"
	FaultNodeLost            = "node lost (unknown after the node monitor's grace, then deleted)"
	FaultNodeNotReady        = "node NotReady"
	FaultNodePartitioned     = "node partitioned (unreachable, its members still running)"
	FaultNodeFenced          = "node fenced out-of-service"
	FaultNodePastGrace       = "member on an unhealthy node past the grace period"
	FaultStuckTerminating    = "member stuck terminating"
	FaultVolumeLost          = "volume lost"
	FaultForeignObject       = "another owner's workload, Service, PDB or NetworkPolicy under a fleet's name"
	FaultForeignClaim        = "a claim under a fleet's name with another fleet's UID"
	FaultUnlabelledClaim     = "a claim under a fleet's name with no fleet label"
	FaultUninstall           = "uninstall (the fleets' CRD deleted with fleets running)"
	FaultReservationDeleted  = "reservation deleted by hand"
	FaultReservationRecreate = "reservation recreated by hand"
	FaultAPIRefusal          = "the API server refuses a workload"
	FaultConflict            = "write conflicts"
	FaultRecommend           = "utilization recommendation, Recommend mode"
	FaultAuto                = "utilization recommendation, Auto mode"
	FaultRestart             = "operator restart"
	FaultCrash               = "member crash"
	FaultWatch               = "watch lag, reorder, duplicates, drops"
	FaultStatusCleared       = "status cleared by hand"
	FaultHistoryCleared      = "capacity history cleared by hand"
	FaultPremiseRefused      = "a write refused by its premise on fresh reads"
	FaultDisksGrown          = "disks grown (spec.storage.size raised)"
	FaultExpansionForbidden  = "a storage class that forbids expansion"
	FaultExpansionFailed     = "a volume expansion that fails"
	FaultFilesystemOffline   = "a filesystem that grows only when its member starts again"

	FaultDrain           = "node drained (cordoned, its members evicted through the budget)"
	FaultEvictionAllowed = "an eviction the budget allowed"
	FaultEvictionRefused = "an eviction the budget refused"
	FaultScaleInCordoned = "a scale-in held while a member's node is cordoned"
)

// FaultKinds lists every fault kind a property run must see.
var FaultKinds = []string{FaultBrokenRollout, FaultNodeLost, FaultNodeNotReady, FaultNodePartitioned, FaultNodeFenced,
	FaultNodePastGrace, FaultStuckTerminating, FaultVolumeLost, FaultForeignObject, FaultForeignClaim, FaultUnlabelledClaim, FaultUninstall, FaultReservationDeleted,
	FaultReservationRecreate, FaultAPIRefusal, FaultConflict, FaultRecommend, FaultAuto, FaultRestart, FaultCrash, FaultWatch,
	FaultStatusCleared, FaultHistoryCleared, FaultPremiseRefused, FaultDisksGrown, FaultExpansionForbidden, FaultExpansionFailed,
	FaultFilesystemOffline}

// DrainFaultKinds lists the fault kinds a property run with DrainOps must see.
var DrainFaultKinds = []string{FaultDrain, FaultEvictionAllowed, FaultEvictionRefused, FaultScaleInCordoned}

// nodeMonitorGrace is how long the node lifecycle controller waits for heartbeats before it marks
// a node unknown (kube-controller-manager's --node-monitor-grace-period).
const nodeMonitorGrace = 40 * time.Second

type scheduledFault struct {
	at   time.Time
	what string
	fn   func() error
}

func (w *World) schedule(after time.Duration, what string, fn func() error) {
	w.scheduled = append(w.scheduled, scheduledFault{at: w.C.Now().Add(after), what: what, fn: fn})
}

func (w *World) runScheduled() error {
	var keep []scheduledFault
	for _, s := range w.scheduled {
		if w.C.Now().Before(s.at) {
			keep = append(keep, s)
			continue
		}
		if err := w.Fault(s.what, s.fn); err != nil {
			return err
		}
	}
	w.scheduled = keep
	return nil
}

// loseNode plays a machine that dies: its members stop at once, the node goes unknown after the
// node monitor's grace period, and the cloud's node controller deletes the Node later.
func (w *World) loseNode(node string, deleteAfter time.Duration) {
	w.Faults[FaultNodeLost]++
	w.tracef("%s fault: machine of %s dies", w.C.Now().Format("15:04:05"), node)
	w.schedule(nodeMonitorGrace, "node "+node+" unknown", func() error {
		if w.C.Node(node) == nil {
			return nil
		}
		return w.C.SetNodeUnreachable(node)
	})
	w.schedule(nodeMonitorGrace+deleteAfter, "node "+node+" deleted", func() error {
		if w.C.Node(node) == nil {
			return nil
		}
		return w.C.LoseNode(node)
	})
}

// observeFaults counts the faults that are states rather than acts.
func (w *World) observeFaults() {
	for _, p := range w.C.Pods(Namespace) {
		state := w.C.NodeState(p.Spec.NodeName)
		unhealthy := state == sim.NodeNotReady || state == sim.NodeUnreachable
		if p.DeletionTimestamp != nil && (unhealthy || state == sim.NodeGone) && !w.C.Now().Before(p.DeletionTimestamp.Time) {
			w.Faults[FaultStuckTerminating]++
		}
		if unhealthy {
			if n := w.C.Node(p.Spec.NodeName); n != nil {
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && w.C.Now().Sub(c.LastTransitionTime.Time) > 20*time.Second {
						w.Faults[FaultNodePastGrace]++
					}
				}
			}
		}
	}
	w.countCordonHolds()
	if n := w.Op.PremiseRefusals; n > 0 {
		w.Faults[FaultPremiseRefused] += n
		w.Op.PremiseRefusals = 0
	}
}

type foreignObject struct {
	kind            sim.Kind
	namespace, name string
}

// someone is the owner label of objects made by hand.
const someone = "someone-else"

// createForeign creates, under a fleet's name, one object the fleet would own, made by someone
// else: no owner reference to the fleet.
func (w *World) createForeign(fleet string, which int) error {
	fake := NewFleet(FleetSpec{Name: fleet, Profile: v1alpha1.ProfileBucket, Members: 1, Bucket: "foreign", Workload: v1alpha1.WorkloadDeployment})
	fake.UID = types.UID("uid-foreign-" + fleet)
	objs := render.Render(fake, 1, -1)
	// The i-th rendered object of a kind: the fault names kinds, the fleet may render more.
	nth := func(k sim.Kind, i int) metav1.Object {
		for _, o := range objs.All() {
			if kinds.Of(o) == k {
				if i == 0 {
					return o
				}
				i--
			}
		}
		panic(fmt.Sprintf("a fleet renders no %s #%d", k, i))
	}
	var kind sim.Kind
	var n int
	switch which {
	case 0:
		kind = sim.KindDeployment
	case 1:
		kind, n = sim.KindService, 1
	case 2:
		kind = sim.KindPDB
	default:
		kind = sim.KindPolicy
	}
	obj := nth(kind, n)
	if w.C.Get(kind, Namespace, obj.GetName()) != nil {
		return nil
	}
	obj.SetOwnerReferences(nil)
	obj.SetNamespace(Namespace)
	l := obj.GetLabels()
	l["app.kubernetes.io/managed-by"] = someone
	obj.SetLabels(l)
	w.Faults[FaultForeignObject]++
	w.foreign = append(w.foreign, foreignObject{kind, Namespace, obj.GetName()})
	return w.Fault(fmt.Sprintf("someone creates %s %s", kind, obj.GetName()), func() error { return w.C.Create(obj) })
}

// createForeignClaim creates a claim named as the fleet's members' claims are, labelled with the
// fleet's name and another fleet's UID, or with no label at all when other is empty (a claim
// made by hand, or restored from a backup that dropped its labels). Its ordinal is one no
// sequence grows to, so a fleet that failed to hold would show it in its writes, not in a member
// mounting someone else's disk.
func (w *World) createForeignClaim(fleet string, other types.UID) error {
	return w.ForeignClaim(fleet, other, 7)
}

// ForeignClaim creates the claim of a fleet's member ordinal as someone else would: labelled with
// the fleet's name and the UID other, or with no label when other is empty. It does nothing when
// a claim of that name exists.
func (w *World) ForeignClaim(fleet string, other types.UID, ordinal int) error {
	name := fmt.Sprintf("data-%s-%d", fleet, ordinal)
	if w.C.PVC(Namespace, name) != nil {
		return nil
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptrTo(StorageClass),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	what := "someone creates claim " + name + " with no fleet label"
	if other != "" {
		pvc.Labels = map[string]string{"app.kubernetes.io/name": "celld", "app.kubernetes.io/instance": fleet, "celld.io/fleet-uid": string(other)}
		what = "someone creates claim " + name + " of fleet UID " + string(other)
		w.Faults[FaultForeignClaim]++
	} else {
		w.Faults[FaultUnlabelledClaim]++
	}
	w.foreign = append(w.foreign, foreignObject{sim.KindPVC, Namespace, name})
	return w.Fault(what, func() error { return w.C.Create(pvc) })
}

// Uninstall deletes the fleets' CustomResourceDefinition, as `kubectl delete crd` or an
// administrator removing the operator does: every fleet is deleted with it, and the operator,
// still running, sees the definition go.
func (w *World) Uninstall() error {
	w.Faults[FaultUninstall]++
	return w.Fault("the administrator deletes the CelldFleet CustomResourceDefinition", w.C.Uninstall)
}

// Reinstall installs the operator again once the old definition is gone: the definition is
// created again and the operator starts anew (a new Deployment, caches that list the cluster).
// It reports whether the fleets' API is served again.
func (w *World) Reinstall() (bool, error) {
	if !w.C.Uninstalling() {
		return true, nil
	}
	if len(w.C.List(sim.KindFleet, "")) > 0 {
		return false, nil
	}
	if err := w.Fault("the administrator installs the operator and its CustomResourceDefinitions again", w.C.Reinstall); err != nil {
		return false, err
	}
	w.Restart()
	return true, nil
}

func ptrTo[T any](v T) *T { return &v }

// removeForeign deletes what was made by hand, as its owner does once told of the NameTaken.
func (w *World) removeForeign() error {
	for _, f := range w.foreign {
		o := w.C.Get(f.kind, f.namespace, f.name)
		if o == nil {
			continue
		}
		if m, ok := o.(metav1.Object); ok && m.GetLabels()["app.kubernetes.io/managed-by"] != someone && f.kind != sim.KindPVC {
			continue
		}
		if err := w.C.Delete(f.kind, f.namespace, f.name); err != nil && !isNotFound(err) {
			return err
		}
	}
	w.foreign = nil
	return nil
}

// removeKeptDisks deletes the disks a fleet's predecessor under the same name left (an
// uninstall keeps every disk): the new fleet never adopts them and says ForeignDisks, so its user
// deletes them once they have taken what they need.
func (w *World) removeKeptDisks() error {
	live := map[string]types.UID{}
	for _, o := range w.C.List(sim.KindFleet, Namespace) {
		if f := o.(*v1alpha1.CelldFleet); f.DeletionTimestamp == nil {
			live[f.Name] = f.UID
		}
	}
	for _, c := range w.C.PVCs(Namespace) {
		uid, ok := live[c.Labels["app.kubernetes.io/instance"]]
		if !ok || c.DeletionTimestamp != nil {
			continue
		}
		if other := types.UID(c.Labels["celld.io/fleet-uid"]); other == "" || other == uid {
			continue
		}
		if err := w.C.Delete(sim.KindPVC, Namespace, c.Name); err != nil && !isNotFound(err) {
			return err
		}
	}
	return nil
}

func isNotFound(err error) bool {
	var s interface{ Status() metav1.Status }
	return errors.As(err, &s) && s.Status().Code == 404
}

// recreateReservation deletes a fleet's reservation and creates it again from a backup: the same
// spec, no history.
func (w *World) recreateReservation(name string) error {
	r := w.C.Reservation(Namespace, name)
	if r == nil {
		return nil
	}
	backup := r.DeepCopy()
	backup.ResourceVersion, backup.UID, backup.CreationTimestamp = "", "", metav1.Time{}
	backup.Status = v1alpha1.CelldReservationStatus{}
	w.Faults[FaultReservationRecreate]++
	return w.Fault("someone recreates reservation "+name+" from a backup", func() error {
		if err := w.C.DeleteReservation(Namespace, name); err != nil {
			return err
		}
		return w.C.Create(backup)
	})
}
