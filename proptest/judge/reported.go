package judge

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
)

// S6Reported names the promise of SPEC section 6 about what only a person can unblock: the
// status says so, naming what to act on.
const S6Reported = "§6 what only a person can unblock is reported"

// UnfencedPasses counts the passes judged for a member that only fencing can replace.
const UnfencedPasses = "passes that saw a member past the grace period on a node nobody fenced, judged reported"

// defaultGrace is spec.healing.unreachableGracePeriod when the fleet leaves it out (the CRD's
// default).
const defaultGrace = 5 * time.Minute

// Unfenced judges one pass on one fleet against what the operator observed: a member of a
// fleet whose members have identities (a StatefulSet's: it comes back under the same name and
// disk only once its Pod is gone), or a member already terminating, on a node that exists, is
// not Ready or is unreachable, and has been so for longer than the fleet's grace period, with no
// out-of-service taint, can only be replaced once a person fences the node; a status written in
// that pass must say Degraded=True, and when its reason is MemberUnreachable, name the member
// and its node. The time the node went bad is read the latest way the node shows it (its Ready
// condition's last transition, the unreachable taint's time), so the operator is held to report
// only what is past its grace by every account.
func (j *Judge) Unfenced(f *v1alpha1.CelldFleet, now time.Time, pods []*corev1.Pod, nodes map[string]*corev1.Node, synced bool, sent []sim.Request) error {
	if f == nil || f.DeletionTimestamp != nil || !synced {
		return nil
	}
	grace := defaultGrace
	if g := f.Spec.Healing.UnreachableGracePeriod; g != nil {
		grace = g.Duration
	}
	identities := f.Spec.Profile == v1alpha1.ProfilePersistentFleet || f.Spec.Workload == v1alpha1.WorkloadOrderedStatefulSet
	var member, node string
	for _, p := range pods {
		if types.UID(p.Labels["celld.io/fleet-uid"]) != f.UID || p.Spec.NodeName == "" || (!identities && p.DeletionTimestamp == nil) {
			continue
		}
		n, ok := nodes[p.Spec.NodeName]
		if !ok {
			continue // gone: replaced at once, nothing to report
		}
		if since, bad := unhealthySince(n); bad && now.Sub(since) > grace {
			member, node = p.Name, n.Name
			break
		}
	}
	if member == "" {
		return nil
	}
	j.Extra[UnfencedPasses]++
	j.judged(S6Reported)
	for _, r := range sent {
		if r.Resource != "celldfleets/status" || r.Namespace != f.Namespace || r.Name != f.Name || r.Err != nil || r.Status == nil {
			continue
		}
		var degraded *string
		reason, message := "", ""
		for i := range r.Status.Conditions {
			if c := &r.Status.Conditions[i]; c.Type == v1alpha1.ConditionDegraded {
				s := string(c.Status)
				degraded, reason, message = &s, c.Reason, c.Message
			}
		}
		if degraded == nil || *degraded != "True" {
			return fail(S6Reported, "fleet %s: member %s has been on node %s, unhealthy past the grace period %s and not fenced, and the operator wrote Degraded %s: only a person fencing the node replaces it, and the status must say so",
				f.Name, member, node, grace, orNone(degraded))
		}
		if reason == "MemberUnreachable" && (!strings.Contains(message, member) || !strings.Contains(message, node)) {
			return fail(S6Reported, "fleet %s: Degraded MemberUnreachable %q does not name member %s and node %s", f.Name, message, member, node)
		}
	}
	return nil
}

// unhealthySince says whether a node is unhealthy (not Ready, or tainted unreachable), and
// since when by the latest of the times it shows; a fenced node is not judged here.
func unhealthySince(n *corev1.Node) (time.Time, bool) {
	bad := true
	var since time.Time
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			bad = c.Status != corev1.ConditionTrue
			since = c.LastTransitionTime.Time
		}
	}
	for _, t := range n.Spec.Taints {
		switch t.Key {
		case corev1.TaintNodeOutOfService:
			return time.Time{}, false
		case corev1.TaintNodeUnreachable:
			bad = true
			if t.TimeAdded != nil && t.TimeAdded.After(since) {
				since = t.TimeAdded.Time
			}
		}
	}
	if since.IsZero() {
		since = n.CreationTimestamp.Time
	}
	return since, bad
}
