package proptest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/proptest/harness"
)

// A member whose node stops answering, on a fleet whose members have identities (a
// StatefulSet's), is never forced away from a node that may be alive: past the grace period the
// fleet says Degraded=MemberUnreachable naming the member and the node, whatever the fleet is
// doing (at rest, growing, rolling out), until a person fences the node; then the member is
// replaced and the fleet converges. Every pass is judged by the reporting judge (a status
// written past the grace period must be Degraded and, as MemberUnreachable, name both) and by
// clause 3's judges (no deletion but a heal, no force-delete on a node not fenced, never two
// copies of a member).
func TestUnfencedMemberIsReported(t *testing.T) {
	for _, base := range profiles {
		if base.Profile != v1alpha1.ProfilePersistentFleet && base.Workload != v1alpha1.WorkloadOrderedStatefulSet {
			continue // a Deployment's member is deleted gracefully and replaced: nothing to report
		}
		for _, doing := range []string{"at-rest", "growing", "rolling-out"} {
			t.Run(fmt.Sprintf("%s-%s/%s", base.Profile, base.Workload, doing), func(t *testing.T) {
				w := harness.NewWorld(8, 1)
				must(t, w.CreateFleet(fleetSpec(base, "alpha", 3)))
				must(t, w.Converge())
				p := w.C.Pod(harness.Namespace, "alpha-1")
				node := p.Spec.NodeName
				must(t, w.C.SetNodeUnreachable(node))
				switch doing {
				case "growing":
					must(t, w.Scale("alpha", 5))
				case "rolling-out":
					must(t, w.SetImage("alpha", "celld:v2"))
				}
				must(t, w.Step(40))
				c := degraded(w.C.Fleet(harness.Namespace, "alpha"))
				if c == nil || c.Reason != "MemberUnreachable" || !strings.Contains(c.Message, "alpha-1") || !strings.Contains(c.Message, node) {
					t.Errorf("Degraded %+v: want MemberUnreachable naming alpha-1 and %s", c, node)
				}
				if q := w.C.Pod(harness.Namespace, "alpha-1"); q == nil || q.UID != p.UID {
					t.Errorf("member alpha-1 on the unfenced node %s was replaced: %v", node, q)
				}
				must(t, w.C.FenceNode(node))
				must(t, w.Converge())
				if q := w.C.Pod(harness.Namespace, "alpha-1"); q == nil || q.UID == p.UID {
					t.Errorf("member alpha-1 was not replaced once its node was fenced")
				}
				if c := degraded(w.C.Fleet(harness.Namespace, "alpha")); c != nil && c.Status == "True" {
					t.Errorf("still Degraded once fenced and converged: %+v", c)
				}
			})
		}
	}
}

// A member that never becomes ready with nothing healing can do about it (an image that never
// starts: replacing the member brings back the same template) leaves the fleet saying
// Degraded=MemberStuck, naming it, past the grace period, whatever the fleet is doing: a new
// fleet provisioning, or a running one after a rollout to a broken image whose broken member
// healing already replaced once. No member is deleted again and again, nothing is scaled in.
// Every pass is judged by the reporting judge (a status written then must be Degraded and, as
// MemberStuck, name the member). Once spec.image names an image that starts, the fleet
// converges.
func TestStuckMemberIsReported(t *testing.T) {
	for _, base := range profiles {
		if base.Profile != v1alpha1.ProfilePersistentFleet && base.Workload != v1alpha1.WorkloadOrderedStatefulSet {
			continue // a Deployment's rollout keeps its old members while the new one is stuck
		}
		for _, when := range []string{"provisioning", "rolled-out"} {
			t.Run(fmt.Sprintf("%s-%s/%s", base.Profile, base.Workload, when), func(t *testing.T) {
				w := harness.NewWorld(8, 1)
				image := "celld:broken"
				if when == "provisioning" {
					w.C.BreakImage(image)
					f := harness.NewFleet(fleetSpec(base, "alpha", 3))
					f.Spec.Image = image
					_, err := w.C.CreateFleet(f)
					must(t, err)
				} else {
					must(t, w.CreateFleet(fleetSpec(base, "alpha", 3)))
					must(t, w.Converge())
					must(t, w.C.StartBrokenRollout(harness.Namespace, "alpha", image))
				}
				must(t, w.Step(60))
				c := degraded(w.C.Fleet(harness.Namespace, "alpha"))
				if c == nil || c.Reason != "MemberStuck" || !strings.Contains(c.Message, "alpha-") {
					t.Errorf("Degraded %+v: want MemberStuck naming the member", c)
				}
				if s := w.C.StatefulSet(harness.Namespace, "alpha"); s == nil || *s.Spec.Replicas != 3 {
					t.Errorf("the workload of a fleet with a stuck member: %v; want it kept at 3", s)
				}
				must(t, w.SetImage("alpha", "celld:v3"))
				must(t, w.Converge())
				wantSteady(t, w, 3, "once spec.image names one that starts")
			})
		}
	}
}

// A running member's disk deleted by hand (kept by the claim's protection while the member
// runs) or lost leaves the fleet saying Degraded=DiskLost, naming the claim, while the member
// keeps running on it: the operator does not replace a member for its disk while it runs. Every
// pass is judged by the reporting judge (a status written then must be Degraded and, as
// DiskLost, name the claim). A Lost claim never binds again: once a person deletes it, as the
// status says to, the member starts again on a new disk and the fleet converges.
func TestGoingDiskIsReported(t *testing.T) {
	for _, how := range []string{"deleted", "lost"} {
		t.Run(how, func(t *testing.T) {
			w := harness.NewWorld(8, 1)
			must(t, w.CreateFleet(fleetSpec(profiles[0], "alpha", 3)))
			must(t, w.Converge())
			p := w.C.Pod(harness.Namespace, "alpha-1")
			if how == "deleted" {
				must(t, w.C.Delete(sim.KindPVC, harness.Namespace, "data-alpha-1"))
			} else {
				must(t, w.C.LoseDisk(harness.Namespace, "data-alpha-1"))
			}
			must(t, w.Step(20))
			c := degraded(w.C.Fleet(harness.Namespace, "alpha"))
			if c == nil || c.Reason != "DiskLost" || !strings.Contains(c.Message, "data-alpha-1") {
				t.Errorf("Degraded %+v: want DiskLost naming data-alpha-1", c)
			}
			if q := w.C.Pod(harness.Namespace, "alpha-1"); q == nil || q.UID != p.UID {
				t.Errorf("member alpha-1 was replaced while it ran on its going disk: %v", q)
			}
			if how == "lost" {
				if !strings.Contains(c.Message, "kubectl delete pvc data-alpha-1") {
					t.Errorf("DiskLost %q does not give the command that frees the member", c.Message)
				}
				must(t, w.C.Delete(sim.KindPVC, harness.Namespace, "data-alpha-1"))
			}
			must(t, w.C.CrashMember(harness.Namespace, "alpha-1"))
			must(t, w.Converge())
			wantSteady(t, w, 3, "once the member stopped")
		})
	}
}

// A member whose node is gone cannot come back where it is, and healing replaces one member at
// a time: while another member is not ready (here on a node that stopped answering, within the
// grace period), the one of the gone node waits, and the fleet says Degraded=MemberCannotComeBack
// naming it. Every pass is judged by the reporting judge and by clause 3's judges (no heal while
// another member is not ready; the operator deletes no Pod). Once the other node answers again, the member of the gone node
// is replaced and the fleet converges.
func TestMemberThatCannotComeBackIsReported(t *testing.T) {
	w := harness.NewWorld(8, 1)
	spec := fleetSpec(profiles[0], "alpha", 3)
	spec.Grace = time.Hour
	must(t, w.CreateFleet(spec))
	must(t, w.Converge())
	p, other := w.C.Pod(harness.Namespace, "alpha-0"), w.C.Pod(harness.Namespace, "alpha-2")
	must(t, w.C.SetNodeUnreachable(other.Spec.NodeName))
	must(t, w.C.LoseNode(p.Spec.NodeName))
	// Before the orphan Pod collector removes alpha-0 on its own.
	must(t, w.Step(2))
	c := degraded(w.C.Fleet(harness.Namespace, "alpha"))
	if c == nil || c.Reason != "MemberCannotComeBack" || !strings.Contains(c.Message, "alpha-0") || !strings.Contains(c.Message, "alpha-2") {
		t.Errorf("Degraded %+v: want MemberCannotComeBack naming alpha-0 and alpha-2", c)
	}
	for _, r := range w.C.Requests() {
		if r.Verb == "delete" && r.Resource == "pods" {
			t.Errorf("the operator deleted Pod %s while a member was not ready", r.Name)
		}
	}
	must(t, w.C.SetNodeReady(other.Spec.NodeName))
	must(t, w.Converge())
	wantSteady(t, w, 3, "once the other node answers")
	if q := w.C.Pod(harness.Namespace, "alpha-0"); q == nil || q.UID == p.UID {
		t.Errorf("member alpha-0 of the gone node was not replaced")
	}
}
