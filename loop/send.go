package loop

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// Writer sends the request of one kind of action, its premise already confirmed. The operator's
// driver sends them to the API server and the simulator to its store; Dispatch chooses the
// request and makes the checks every driver owes, so the property tests run the ones the
// operator runs.
type Writer interface {
	// Current reads the object an Apply writes, bypassing every cache; nil when it is absent.
	Current(ctx context.Context, t *Target, a machine.Action) (metav1.Object, error)
	// Apply writes the action's object and returns the server's answer: the object as written
	// (nil when the server gave none).
	Apply(ctx context.Context, t *Target, a machine.Action) (kinds.Object, error)
	BindReservation(ctx context.Context, t *Target, a machine.Action) error
	AppendHistory(ctx context.Context, t *Target, a machine.Action) error
	// SetFinalizer adds the fleet's finalizer (AddFinalizer) or removes it.
	SetFinalizer(ctx context.Context, t *Target, a machine.Action) error
	DeletePod(ctx context.Context, t *Target, a machine.Action) error
	DeleteDisk(ctx context.Context, t *Target, a machine.Action) error
	ResizeDisk(ctx context.Context, t *Target, a machine.Action) error
	RecreateWorkload(ctx context.Context, t *Target, a machine.Action) error
	StopWorkload(ctx context.Context, t *Target, a machine.Action) error
	PublishStatus(ctx context.Context, t *Target, a machine.Action) error
	RecordEvent(ctx context.Context, t *Target, a machine.Action) error
}

// Dispatch sends one action whose premise, if any, was confirmed: the driver's checks (Check),
// then its request (Route).
func Dispatch(ctx context.Context, w Writer, t *Target, a machine.Action) error {
	a, err := Check(ctx, w, t, a)
	if err != nil {
		return err
	}
	return Route(ctx, w, t, a)
}

// Check makes the checks every driver owes before a request, whatever the decision said: a Pod is
// force-deleted only on a premise that its node is gone or fenced, and an Apply writes an object
// only when it is absent or controlled by the fleet the object names as its controller (the
// caches may lag a person's create: someone else's object is never taken over). It returns the
// action to send: an Apply of an object that exists carries the UID the check read, so that the
// API server refuses the write if the object was deleted, or replaced by someone else's, between
// the check and the write.
func Check(ctx context.Context, w Writer, t *Target, a machine.Action) (machine.Action, error) {
	switch a.Kind {
	case machine.DeletePod:
		if p := a.Premise; a.Force && (p == nil || p.Node == "" || (!p.NodeGone && !p.NodeFenced)) {
			// A force-delete on a node that may be alive starts a second copy of the member.
			return a, fmt.Errorf("delete pod %s: refusing to force-delete a Pod whose node is not known to be gone or fenced", a.Key)
		}
	case machine.Apply:
		uid, err := owned(ctx, w, t, a)
		a.UID = uid
		return a, err
	case machine.ResizeDisk:
		if p := a.Premise; p == nil || p.DiskOf == "" || p.DiskUID != a.UID || p.DiskBelow == nil || p.DiskBelow.Cmp(a.Size) != 0 || !heldToFleet(p) {
			// Only a claim confirmed as the fleet's own, only upward, and only while the fleet is
			// the one decided on (not deleted since: a deletion raises its generation).
			return a, fmt.Errorf("resize disk %s: refusing without a premise that the claim is the fleet's own and asks for less, on the fleet's generation", a.Key)
		}
	case machine.RecreateWorkload:
		if p := a.Premise; a.UID == "" || p == nil || !p.Workload || !p.WorkloadExists || !p.RolledOut {
			// Only a workload that settled, and only that one, is created again.
			return a, fmt.Errorf("recreate workload %s: refusing without a UID and a premise that it rolled out", a.Key)
		}
	case machine.StopWorkload:
		if p := a.Premise; a.UID == "" || !heldToFleet(p) {
			// Stopping every member at once is hibernation's alone: only the workload decided on,
			// and only while the fleet still asks for it (the generation that set spec.hibernate).
			return a, fmt.Errorf("stop workload %s: refusing without a UID and a premise on the fleet's generation", a.Key)
		}
	}
	return a, nil
}

// heldToFleet reports whether a premise names the fleet and the generation decided on, which a
// deletion raises (the fleet's own, or its CRD's at an uninstall): the writes a deletion must
// stop are held to it.
func heldToFleet(p *machine.Premise) bool { return p != nil && p.Fleet != "" && p.FleetGeneration != 0 }

// Route sends one action's request through the Writer's method of its kind. A Requeue sends
// nothing.
func Route(ctx context.Context, w Writer, t *Target, a machine.Action) error {
	switch a.Kind {
	case machine.DeletePod:
		return w.DeletePod(ctx, t, a)
	case machine.Apply:
		obj, err := w.Apply(ctx, t, a)
		if a.UID != "" && Replaced(err) {
			// Not the spec's refusal, which would hold the fleet until its spec changes: the
			// next sync observes the new object and says whose it is.
			return fmt.Errorf("apply %s: %s was replaced since its owner check read uid %s (%v): %w",
				a.Key, a.Ref, a.UID, err, machine.ErrPremiseChanged)
		}
		if err == nil && obj != nil {
			t.Answers = append(t.Answers, obj)
		}
		return err
	case machine.BindReservation:
		return w.BindReservation(ctx, t, a)
	case machine.AppendHistory:
		return w.AppendHistory(ctx, t, a)
	case machine.AddFinalizer, machine.RemoveFinalizer:
		return w.SetFinalizer(ctx, t, a)
	case machine.DeleteDisk:
		return w.DeleteDisk(ctx, t, a)
	case machine.ResizeDisk:
		return w.ResizeDisk(ctx, t, a)
	case machine.RecreateWorkload:
		return w.RecreateWorkload(ctx, t, a)
	case machine.StopWorkload:
		return w.StopWorkload(ctx, t, a)
	case machine.PublishStatus:
		return w.PublishStatus(ctx, t, a)
	case machine.RecordEvent:
		return w.RecordEvent(ctx, t, a)
	case machine.Requeue:
		return nil
	}
	return fmt.Errorf("unknown action kind %q", a.Kind)
}

// owned refuses an Apply of an object that exists and is not controlled by the fleet the
// rendered object names as its controller. It returns the UID of the object it read, "" when
// there is none.
func owned(ctx context.Context, w Writer, t *Target, a machine.Action) (types.UID, error) {
	obj, ok := a.Object.(metav1.Object)
	if !ok {
		return "", fmt.Errorf("apply %s: %T is not a Kubernetes object", a.Key, a.Object)
	}
	ref := metav1.GetControllerOf(obj)
	if ref == nil {
		return "", fmt.Errorf("apply %s: the rendered object names no controller", a.Key)
	}
	cur, err := w.Current(ctx, t, a)
	if err != nil {
		return "", fmt.Errorf("apply %s: read it first: %w", a.Key, err)
	}
	if cur == nil {
		return "", nil
	}
	if !kinds.ControlledBy(cur, ref.UID) {
		return "", fmt.Errorf("apply %s: %s exists and is not controlled by fleet %s/%s (uid %s): %w",
			a.Key, a.Ref, obj.GetNamespace(), ref.Name, ref.UID, machine.ErrPremiseChanged)
	}
	return cur.GetUID(), nil
}

// Replaced reports whether the API server refused a write that carried a UID because the object
// of that name has another: an apply's metadata.uid cannot change an object's (Invalid, on that
// field). A write that carried a UID to an object deleted since is a Conflict, retried as any.
func Replaced(err error) bool {
	var s apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &s) || s.Status().Details == nil {
		return false
	}
	for _, c := range s.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}
