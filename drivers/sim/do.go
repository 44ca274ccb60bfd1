package sim

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/loop"
	"github.com/celld/celld-operator/machine"
)

// Do sends the request of one of the machine's actions, as the API server gets it, and logs it:
// none of the driver's own checks (Send) is made, so a test can send what the operator must
// never. Like the driver, it treats a delete or status write of an object that is already gone as
// done (the action holds), and returns the API server's errors otherwise, wrapped with the
// action: apierrors.IsConflict, IsAlreadyExists, IsInvalid and IsNotFound see through the
// wrapping.
func (c *Cluster) Do(a machine.Action) error {
	return c.request(a, func(w simWriter) error { return loop.Route(context.Background(), w, &loop.Target{}, a) })
}

// Send sends one action as the operator's driver does (loop.Dispatch): the driver's checks
// first, which refuse with no request sent, then the request, logged.
func (c *Cluster) Send(ctx context.Context, t *loop.Target, a machine.Action) error {
	a, err := loop.Check(ctx, simWriter{c: c, req: &Request{}}, t, a)
	if err != nil {
		return err
	}
	return c.request(a, func(w simWriter) error { return loop.Route(ctx, w, t, a) })
}

// request logs the request route sends for a.
func (c *Cluster) request(a machine.Action, route func(simWriter) error) error {
	if a.Kind == machine.Requeue {
		return nil
	}
	req := Request{Time: c.now, Action: a.Kind, Key: a.Key, Namespace: a.Namespace, Name: a.Name, FleetUID: c.fleetReached(a)}
	if a.Kind == machine.RecordEvent {
		req.Reason = a.Reason
	}
	err := route(simWriter{c: c, req: &req})
	req.Err = err
	c.requests = append(c.requests, req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", a.Kind, a.Key, err)
	}
	return nil
}

// fleetReached is the fleet whose object an action reaches, as stored now: what a Pod or claim
// deleted is labelled with, the fleet an applied object or reservation is for, the fleet itself
// for its finalizer, status, history and Events.
func (c *Cluster) fleetReached(a machine.Action) types.UID {
	switch a.Kind {
	case machine.DeletePod:
		if p := c.pod(a.Namespace, a.Name); p != nil {
			return types.UID(p.Labels[kinds.LabelFleetUID])
		}
		return ""
	case machine.DeleteDisk, machine.ResizeDisk:
		if pvc := c.claim(a.Namespace, a.Name); pvc != nil {
			return types.UID(pvc.Labels[kinds.LabelFleetUID])
		}
		return ""
	case machine.Apply, machine.BindReservation:
		if r, ok := a.Object.(*v1alpha1.CelldReservation); ok {
			return r.Spec.FleetUID
		}
		if o, ok := a.Object.(object); ok {
			if uid := o.GetLabels()[kinds.LabelFleetUID]; uid != "" {
				return types.UID(uid)
			}
			if ref := metav1.GetControllerOf(o); ref != nil {
				return ref.UID
			}
		}
		return ""
	}
	if f := c.fleet(a.Namespace, a.Name); f != nil {
		return f.UID
	}
	return ""
}

// simWriter is the cluster as the loop's Writer: each kind of action handled as the API server
// handles its request, logged in req.
type simWriter struct {
	c   *Cluster
	req *Request
}

// Current is the object an Apply writes as stored; the request is logged as the apply's.
func (w simWriter) Current(_ context.Context, _ *loop.Target, a machine.Action) (metav1.Object, error) {
	o, ok := a.Object.(object)
	if !ok {
		return nil, fmt.Errorf("object %T is not a Kubernetes object", a.Object)
	}
	k, ok := kindOf(o)
	if !ok {
		return nil, fmt.Errorf("object %T is not a kind the cluster stores", a.Object)
	}
	ns := a.Namespace
	if o.GetNamespace() != "" {
		ns = o.GetNamespace()
	}
	w.req.Verb, w.req.Resource, w.req.Namespace, w.req.Name = "apply", row(k).Resource.Resource, ns, o.GetName()
	if cur := w.c.get(k, ns, o.GetName()); cur != nil {
		return cur, nil
	}
	return nil, nil
}

// InjectConflicts makes the next n write requests (Events aside) fail with a Conflict, as
// writes racing another writer do.
func (c *Cluster) InjectConflicts(n int) { c.conflicts += n }

// StopInjecting cancels the conflicts and refusals injected and not yet spent.
func (c *Cluster) StopInjecting() { c.conflicts, c.refusals = 0, 0 }

// InjectRefusals makes the next n workload applies fail as Invalid, as an admission webhook or a
// validation the operator's render does not know of refuses them.
func (c *Cluster) InjectRefusals(n int) { c.refusals += n }

func (c *Cluster) conflict(k Kind, name string) error {
	if c.conflicts <= 0 {
		return nil
	}
	c.conflicts--
	return apierrors.NewConflict(row(k).Resource, name,
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

func finalizerForbidden() field.ErrorList {
	return field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers"),
		"no new finalizers can be added if the object is being deleted")}
}

func (w simWriter) Apply(_ context.Context, _ *loop.Target, a machine.Action) (kinds.Object, error) {
	c, req := w.c, w.req
	o, ok := a.Object.(object)
	if !ok {
		return nil, fmt.Errorf("object %T is not a Kubernetes object", a.Object)
	}
	k, ok := kindOf(o)
	if !ok {
		return nil, fmt.Errorf("object %T is not a kind the cluster stores", a.Object)
	}
	req.Verb, req.Resource, req.Name = "apply", row(k).Resource.Resource, o.GetName()
	if o.GetNamespace() != "" {
		req.Namespace = o.GetNamespace()
	}
	if err := c.conflict(k, req.Name); err != nil {
		return nil, err
	}
	if err := c.checkUID(k, req.Namespace, o, a.UID); err != nil {
		return nil, err
	}
	if err := c.checkPremise(a); err != nil {
		return nil, err
	}
	workload := k == KindStatefulSet || k == KindDeployment
	if workload && c.refusals > 0 {
		c.refusals--
		return nil, invalid(o, field.ErrorList{field.Invalid(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("image"),
			"", "the API server refuses this object (injected)")})
	}
	var before workloadState
	var beforeSet *appsv1.StatefulSet
	if workload {
		before = c.workloadStateOf(k, req.Namespace, req.Name)
		if s, ok := c.get(k, req.Namespace, req.Name).(*appsv1.StatefulSet); ok {
			beforeSet = s.DeepCopy()
		}
	}
	res, err := c.apply(a.Object, a.Namespace)
	if err != nil {
		return nil, err
	}
	req.Changed = res.changed
	if workload {
		c.recordReplicaWrite(k, before, res)
		if s, ok := res.stored.(*appsv1.StatefulSet); ok && res.changed {
			c.recordPartitionWrite(beforeSet, s)
		}
	}
	return copyOf(res.stored), nil
}

// checkUID holds an apply that carries a UID to it, as the API server does: no object is created
// in the place of one deleted (Conflict), and another's is not written (Invalid: metadata.uid is
// immutable).
func (c *Cluster) checkUID(k Kind, namespace string, o object, uid types.UID) error {
	if uid == "" {
		return nil
	}
	cur := c.get(k, namespace, o.GetName())
	switch {
	case cur == nil:
		return apierrors.NewConflict(row(k).Resource, o.GetName(),
			fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", uid))
	case cur.GetUID() != uid:
		return invalid(o, field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable")})
	}
	return nil
}

func (w simWriter) SetFinalizer(_ context.Context, _ *loop.Target, a machine.Action) error {
	c, req := w.c, w.req
	req.Verb, req.Resource = "patch", row(KindFleet).Resource.Resource
	if err := c.conflict(KindFleet, a.Name); err != nil {
		return err
	}
	f := c.fleet(a.Namespace, a.Name)
	if f == nil {
		if a.Kind == machine.RemoveFinalizer {
			return nil
		}
		return apierrors.NewNotFound(row(KindFleet).Resource, a.Name)
	}
	next := f.DeepCopy()
	if a.Kind == machine.RemoveFinalizer {
		if removeFinalizer(next, v1alpha1.FleetFinalizer) {
			req.Changed = c.put(next)
		}
		return nil
	}
	if !addFinalizer(next, v1alpha1.FleetFinalizer) {
		return nil
	}
	if f.DeletionTimestamp != nil {
		return invalid(f, finalizerForbidden())
	}
	req.Changed = c.put(next)
	return nil
}

func (w simWriter) DeletePod(_ context.Context, _ *loop.Target, a machine.Action) error {
	c, req := w.c, w.req
	req.Verb, req.Resource = "delete", row(KindPod).Resource.Resource
	if err := c.conflict(KindPod, a.Name); err != nil {
		return err
	}
	p := c.pod(a.Namespace, a.Name)
	if p == nil {
		return nil
	}
	if err := c.checkPremise(a); err != nil {
		return err
	}
	rec := c.podDeletionOf(p, a)
	opts := deletion{uid: a.UID, rv: a.ResourceVersion}
	if a.Force {
		opts.grace = ptr(int64(0))
	}
	changed, err := c.delete(KindPod, a.Namespace, a.Name, opts)
	if err != nil {
		return err
	}
	req.Changed = changed
	c.contract.pods = append(c.contract.pods, rec)
	return nil
}

// checkPremise confirms an action's premise on the cluster's truth, as the driver confirms it
// with fresh reads.
func (c *Cluster) checkPremise(a machine.Action) error {
	if a.Premise == nil {
		return nil
	}
	return a.Premise.Check(c.Fresh(a))
}

// Fresh reads what an action's premise names from the cluster's truth, as the real driver reads
// it from the API server, bypassing its caches. The objects are copies.
func (c *Cluster) Fresh(a machine.Action) machine.Fresh {
	p := a.Premise
	if p == nil {
		return machine.Fresh{}
	}
	fresh := machine.Fresh{Pods: map[string]*corev1.Pod{}}
	if p.Node != "" {
		if n := c.node(p.Node); n != nil {
			fresh.Node = n.DeepCopy()
		}
	}
	if p.NoMembers || p.DiskOf != "" {
		if pvc := c.claim(a.Namespace, a.Name); pvc != nil {
			if uid := pvc.Labels[kinds.LabelFleetUID]; uid != "" && p.NoMembers {
				fresh.Members = len(c.members(a.Namespace, types.UID(uid), nil))
			}
			if p.DiskOf != "" {
				fresh.Disk = pvc.DeepCopy()
			}
		}
	}
	if p.Claim != "" {
		if pvc := c.claim(a.Namespace, p.Claim); pvc != nil {
			fresh.Claim = pvc.DeepCopy()
		}
	}
	for _, name := range p.Ready {
		if pod := c.pod(a.Namespace, name); pod != nil {
			fresh.Pods[name] = pod.DeepCopy()
		}
	}
	if p.OnlyNotReady != "" {
		// Every member, as the real driver lists them by the fleet's selector.
		if f := c.fleet(a.Namespace, p.Fleet); f != nil {
			for _, pod := range c.members(a.Namespace, f.UID, nil) {
				fresh.Pods[pod.Name] = pod.DeepCopy()
			}
		}
	}
	fresh.MemberNodes = map[string]*corev1.Node{}
	for _, pod := range fresh.Pods {
		if name := pod.Spec.NodeName; name != "" {
			fresh.MemberNodes[name] = nil
			if n := c.node(name); n != nil {
				fresh.MemberNodes[name] = n.DeepCopy()
			}
		}
	}
	if p.FleetGeneration != 0 {
		if f := c.fleet(a.Namespace, p.Fleet); f != nil {
			fresh.FleetGeneration = f.Generation
		}
	}
	if p.Workload {
		// The workload the action writes, or the one the premise names for an action that
		// writes something else (a heal).
		ref := p.WorkloadRef
		if o, ok := a.Object.(object); ok && kinds.IsWorkload(o) {
			ref = kinds.RefOf(o)
		}
		if kinds.IsWorkloadKind(ref.Kind) {
			if w := c.get(ref.Kind, a.Namespace, ref.Name); w != nil {
				fresh.WorkloadExists, fresh.WorkloadGeneration = true, w.GetGeneration()
				fresh.WorkloadRolledOut = events.WorkloadOf(w).RolledOut()
			}
		}
	}
	return fresh
}

func (w simWriter) DeleteDisk(_ context.Context, _ *loop.Target, a machine.Action) error {
	c, req := w.c, w.req
	req.Verb, req.Resource = "delete", row(KindPVC).Resource.Resource
	if err := c.conflict(KindPVC, a.Name); err != nil {
		return err
	}
	pvc := c.claim(a.Namespace, a.Name)
	if pvc == nil {
		return nil
	}
	rec := c.diskDeletionOf(pvc, a)
	rv := a.ResourceVersion
	if a.Premise != nil && a.Premise.DiskOf != "" && pvc.UID == a.UID {
		// As the driver does: the premise confirmed this claim on a fresh read (the loop checks
		// it before sending), and the delete carries that read's resourceVersion.
		if err := c.checkPremise(a); err != nil {
			return err
		}
		rv = pvc.ResourceVersion
	}
	changed, err := c.delete(KindPVC, a.Namespace, a.Name, deletion{uid: a.UID, rv: rv})
	if err != nil {
		return err
	}
	req.Changed = changed
	c.contract.disks = append(c.contract.disks, rec)
	return nil
}

// ResizeDisk raises a claim's storage request as the API server takes it: only a bound claim of
// a class that allows expansion, and never downward (its validation and the
// PersistentVolumeClaimResize admission plugin).
func (w simWriter) ResizeDisk(_ context.Context, _ *loop.Target, a machine.Action) error {
	c, req := w.c, w.req
	req.Verb, req.Resource = "patch", row(KindPVC).Resource.Resource
	if err := c.conflict(KindPVC, a.Name); err != nil {
		return err
	}
	pvc := c.claim(a.Namespace, a.Name)
	switch {
	case pvc == nil:
		return apierrors.NewNotFound(row(KindPVC).Resource, a.Name)
	case pvc.UID != a.UID:
		return apierrors.NewConflict(row(KindPVC).Resource, a.Name, fmt.Errorf("uid %s, the patch says %s", pvc.UID, a.UID))
	}
	if err := c.checkPremise(a); err != nil {
		return err
	}
	cur := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if sc, _ := c.claimClass(pvc); sc == nil || sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		return apierrors.NewForbidden(row(KindPVC).Resource, a.Name, errors.New("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"))
	}
	if pvc.Status.Phase != corev1.ClaimBound || a.Size.Cmp(cur) < 0 {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "PersistentVolumeClaim"}, a.Name, nil)
	}
	rec := c.diskResizeOf(pvc, a.Size.DeepCopy())
	next := pvc.DeepCopy()
	next.Spec.Resources.Requests[corev1.ResourceStorage] = a.Size.DeepCopy()
	req.Changed = c.put(next)
	c.contract.resizes = append(c.contract.resizes, rec)
	return nil
}

// RecreateWorkload deletes a StatefulSet with propagation Orphan: its Pods and claims lose their
// owner reference to it and stay, and a StatefulSet created again under the name adopts them.
func (w simWriter) RecreateWorkload(_ context.Context, _ *loop.Target, a machine.Action) error {
	c, req := w.c, w.req
	req.Verb, req.Resource = "delete", row(KindStatefulSet).Resource.Resource
	if err := c.conflict(KindStatefulSet, a.Name); err != nil {
		return err
	}
	set, _ := c.get(KindStatefulSet, a.Namespace, a.Name).(*appsv1.StatefulSet)
	if set == nil {
		return nil
	}
	if set.UID != a.UID {
		return apierrors.NewConflict(row(KindStatefulSet).Resource, a.Name, fmt.Errorf("uid %s, the precondition says %s", set.UID, a.UID))
	}
	if err := c.checkPremise(a); err != nil {
		return err
	}
	for _, k := range []Kind{KindPod, KindPVC} {
		for _, o := range c.list(k) {
			if o.GetNamespace() != set.Namespace || !ownedBy(o, set.UID) {
				continue
			}
			next := copyOf(o)
			var refs []metav1.OwnerReference
			for _, r := range next.GetOwnerReferences() {
				if r.UID != set.UID {
					refs = append(refs, r)
				}
			}
			next.SetOwnerReferences(refs)
			c.put(next)
		}
	}
	changed, err := c.delete(KindStatefulSet, a.Namespace, a.Name, deletion{uid: a.UID})
	if err != nil {
		return err
	}
	req.Changed = changed
	return nil
}

// StopWorkload deletes a StatefulSet or Deployment with propagation Background: the garbage
// collector then deletes what it owns (its Pods, a Deployment's ReplicaSets and theirs) at once;
// claims it does not own stay.
func (w simWriter) StopWorkload(_ context.Context, _ *loop.Target, a machine.Action) error {
	c, req := w.c, w.req
	k := KindStatefulSet
	if a.Ref.Kind == kinds.Deployment {
		k = KindDeployment
	}
	req.Verb, req.Resource = "delete", row(k).Resource.Resource
	if err := c.conflict(k, a.Name); err != nil {
		return err
	}
	if err := c.checkPremise(a); err != nil {
		return err
	}
	rec := WorkloadStop{Time: c.now, Kind: k, Namespace: a.Namespace, Name: a.Name, Preconditioned: a.UID != "", Claims: map[string]types.UID{}}
	if f := c.fleet(a.Namespace, a.Name); f != nil {
		rec.FleetUID, rec.FleetExists, rec.Hibernate, rec.FleetDeleting = f.UID, true, f.Spec.Hibernate, f.DeletionTimestamp != nil
		for _, o := range c.list(KindPod) {
			if o.GetNamespace() == a.Namespace && o.GetLabels()[kinds.LabelFleetUID] == string(f.UID) {
				rec.Members++
			}
		}
		for _, o := range c.list(KindPVC) {
			if o.GetNamespace() == a.Namespace && o.GetLabels()[kinds.LabelFleetUID] == string(f.UID) {
				rec.Claims[o.GetName()] = o.GetUID()
			}
		}
	}
	changed, err := c.delete(k, a.Namespace, a.Name, deletion{uid: a.UID})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	c.contract.stops = append(c.contract.stops, rec)
	req.Changed = changed
	return nil
}

// ownedBy: one of o's owner references is to the object with that UID.
func ownedBy(o metav1.Object, uid types.UID) bool {
	for _, r := range o.GetOwnerReferences() {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func (w simWriter) PublishStatus(_ context.Context, _ *loop.Target, a machine.Action) error {
	c, req := w.c, w.req
	req.Verb, req.Resource = "update", row(KindFleet).Resource.Resource+"/status"
	if a.Status == nil {
		return errors.New("no status to publish")
	}
	if err := c.conflict(KindFleet, a.Name); err != nil {
		return err
	}
	f := c.fleet(a.Namespace, a.Name)
	if f == nil {
		return nil
	}
	if a.UID != "" && f.UID != a.UID {
		// As the operator's JSON patch's test of metadata.uid fails on a fleet recreated under
		// the name.
		return invalid(f, field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), f.UID,
			"the status is of fleet "+string(a.UID))})
	}
	next := f.DeepCopy()
	next.Status = *a.Status.DeepCopy()
	req.Status = a.Status.DeepCopy()
	req.Changed = c.put(next)
	return nil
}

func (w simWriter) RecordEvent(_ context.Context, _ *loop.Target, a machine.Action) error {
	c, req := w.c, w.req
	// Events are created, never updated: a write conflict cannot hit them.
	req.Verb, req.Resource = "create", "events"
	c.recorded = append(c.recorded, RecordedEvent{Time: c.now, Key: a.Key, Namespace: a.Namespace, Name: a.Name,
		Type: a.EventType, Reason: a.Reason, Message: a.Message})
	req.Changed = true
	return nil
}
