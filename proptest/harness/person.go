package harness

import (
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/machine"
)

// followDeletionBlocked is a person doing what a fleet being deleted asks for when its
// StatefulSet controller will not remove a member (Degraded=DeletionBlocked): a graceful
// `kubectl delete pod NAME` of the member the status names. The Pod's name is read from the
// status the operator wrote, so a message that named the wrong member, or none, leaves the
// fleet stuck and liveness fails.
func (w *World) followDeletionBlocked(fleet string) error {
	f := w.C.Fleet(Namespace, fleet)
	if f == nil || f.DeletionTimestamp == nil {
		return nil
	}
	return w.deleteAsAsked(f, machine.ReasonDeletionBlocked)
}

// followMemberLost is a person, once the faults are over, replacing by hand the member a fleet
// says cannot come back while another is not ready (Degraded=MemberCannotComeBack): the operator
// will not take two members away, but an ordered StatefulSet holds every member above a stuck
// one (a Pending member whose disk was deleted is never given a new one), so only a person ends
// the wait. The member is the one the status names: a message naming the wrong one, or none,
// leaves the fleet stuck and liveness fails.
func (w *World) followMemberLost(fleet string) error {
	f := w.C.Fleet(Namespace, fleet)
	if f == nil || f.DeletionTimestamp != nil {
		return nil
	}
	return w.deleteAsAsked(f, machine.ReasonMemberLost)
}

// deleteAsAsked runs the `kubectl delete pod NAME` that the fleet's Degraded condition of the
// given reason asks for, gracefully, as a person would.
func (w *World) deleteAsAsked(f *v1alpha1.CelldFleet, reason string) error {
	fleet := f.Name
	for _, c := range f.Status.Conditions {
		if c.Type != v1alpha1.ConditionDegraded || c.Status != "True" || c.Reason != reason {
			continue
		}
		_, rest, ok := strings.Cut(c.Message, "kubectl delete pod ")
		if !ok {
			return nil
		}
		name, _, _ := strings.Cut(rest, " ")
		if p := w.C.Pod(Namespace, name); p == nil || p.DeletionTimestamp != nil {
			return nil
		}
		w.tracef("%s user deletes pod %s, as fleet %s's status asks", w.C.Now().Format("15:04:05"), name, fleet)
		if err := w.C.Delete(sim.KindPod, Namespace, name); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// followApproveAsked is a person approving the rollout a fleet's Degraded condition asks them to
// approve (a member stuck on the current template below a held partition, MemberStuck): with
// the revision the message names, read from the status the operator wrote, so a message that
// names none, or the wrong one, leaves the fleet stuck and liveness fails.
func (w *World) followApproveAsked(fleet string) error {
	f := w.C.Fleet(Namespace, fleet)
	if f == nil || f.DeletionTimestamp != nil {
		return nil
	}
	for _, c := range f.Status.Conditions {
		if c.Type != v1alpha1.ConditionDegraded || c.Status != "True" || c.Reason != machine.ReasonMemberStuck {
			continue
		}
		_, rest, ok := strings.Cut(c.Message, v1alpha1.AnnotationRolloutApproved+"=")
		if !ok {
			return nil
		}
		rev, _, _ := strings.Cut(rest, ")")
		if f.Annotations[v1alpha1.AnnotationRolloutApproved] == rev {
			return nil
		}
		w.tracef("%s user approves %s/%s rollout of %s, as its status asks", w.C.Now().Format("15:04:05"), Namespace, fleet, rev)
		return w.C.AnnotateFleet(Namespace, fleet, v1alpha1.AnnotationRolloutApproved, rev)
	}
	return nil
}
