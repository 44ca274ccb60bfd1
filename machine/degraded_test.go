package machine_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/proptest/harness"
)

// convergedFleet brings a fleet of three to Steady in the simulator, with a one-minute grace
// period, and returns the operator's view of it.
func convergedFleet(t *testing.T, profile v1alpha1.Profile) events.View {
	t.Helper()
	w := harness.NewWorld(5, 1)
	if err := w.CreateFleet(harness.FleetSpec{Name: "a", Profile: profile, Members: 3, Bucket: "a-bucket", Grace: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if err := w.Step(1); err != nil {
			t.Fatal(err)
		}
		if f := w.C.Fleet(harness.Namespace, "a"); f != nil && f.Status.State == v1alpha1.StateSteady && f.Status.Members.Ready == 3 {
			if err := w.Step(2); err != nil {
				t.Fatal(err)
			}
			return w.Op.View(harness.Key("a"))
		}
	}
	t.Fatal("fleet did not converge")
	return events.View{}
}

// copyView copies what the cases change: the fleet, the members and the disks.
// copyView is a view the test may change: without the fingerprint Normalize computed, which a
// change would leave stale, so the machine computes it from what the view holds at each step.
func copyView(v events.View) events.View {
	v.Fingerprint = 0
	v.Fleet = v.Fleet.DeepCopy()
	v.Members = append([]events.Member(nil), v.Members...)
	v.Disks = append([]events.Disk(nil), v.Disks...)
	return v
}

func conditionOf(st v1alpha1.CelldFleetStatus, typ string) metav1.Condition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{Type: typ, Status: "absent"}
}

// kinds lists the decision's actions by kind, with the workload applies' keys.
func actionKinds(d machine.Decision) string {
	var out []string
	for _, a := range d.Actions {
		if a.Kind == machine.Apply {
			out = append(out, a.Key)
			continue
		}
		out = append(out, string(a.Kind))
	}
	return strings.Join(out, " ")
}

// What only the operator can see about a running fleet ends in a Degraded condition that names
// the object and what to do, and in no destructive action: no Pod or disk deleted, no scale-in,
// no change to the workload.
func TestOperatorDetectedStatesAreDegradedNotDestructive(t *testing.T) {
	persistent := convergedFleet(t, v1alpha1.ProfilePersistentFleet)
	bucket := convergedFleet(t, v1alpha1.ProfileBucket)
	grace := time.Minute
	cases := []struct {
		name   string
		base   events.View
		breaks func(v *events.View)
		// reason is the Degraded condition's reason ("" for Degraded=False); message must appear
		// in its message.
		reason, message string
		// without, when set, must not appear in the Degraded condition's message.
		without     string
		progressing metav1.ConditionStatus
		requeue     time.Duration
	}{
		{
			name: "a member not ready past the grace period, on the current template",
			base: persistent,
			breaks: func(v *events.View) {
				v.Members[2].Ready, v.Members[2].NotReadySince = false, v.Now.Add(-2*grace)
			},
			reason: machine.ReasonMemberStuck, message: "member a-2 has not been ready for 1m0s", progressing: metav1.ConditionFalse,
		},
		{
			// The first not ready is on a node that went down a moment ago: healing waits on the
			// node's grace and may yet replace it, so it is not the one a person must look at.
			name: "two members not ready past the grace period, the first on a node within its grace",
			base: persistent,
			breaks: func(v *events.View) {
				v.Members[0].Ready, v.Members[0].NotReadySince = false, v.Now.Add(-2*grace)
				nodes := maps.Clone(v.Nodes) // the base's map is shared with the other cases
				nodes[v.Members[0].NodeName] = events.NodeView{UnhealthySince: v.Now.Add(-grace / 4)}
				v.Nodes = nodes
				v.Members[2].Ready, v.Members[2].NotReadySince = false, v.Now.Add(-2*grace)
			},
			reason: machine.ReasonMemberStuck, message: "member a-2 has not been ready for 1m0s", progressing: metav1.ConditionFalse,
			requeue: grace * 3 / 4, // the node's grace ends
		},
		{
			name: "the same member, and a scale-in requested meanwhile",
			base: persistent,
			breaks: func(v *events.View) {
				v.Members[2].Ready, v.Members[2].NotReadySince = false, v.Now.Add(-2*grace)
				v.Fleet.Spec.Members = 2
			},
			reason: machine.ReasonMemberStuck, message: "fix spec.image or spec.resources", progressing: metav1.ConditionFalse,
		},
		{
			name: "a Deployment's new member pending past the grace period",
			base: bucket,
			breaks: func(v *events.View) {
				m := v.Members[0]
				m.Name, m.UID, m.Ready, m.NodeName, m.Revision, m.NotReadySince = "a-new", "uid-new", false, "", "new-hash", v.Now.Add(-2*grace)
				v.Members = append(v.Members, m)
			},
			reason: machine.ReasonMemberStuck, message: "kubectl describe pod a-new", progressing: metav1.ConditionFalse,
		},
		{
			name: "a member not ready within the grace period: not yet, and a requeue for when it ends",
			base: persistent,
			breaks: func(v *events.View) {
				v.Members[2].Ready, v.Members[2].NotReadySince = false, v.Now.Add(-grace/4)
			},
			progressing: metav1.ConditionTrue, requeue: grace * 3 / 4,
		},
		{
			name: "a member stuck on an old revision while another is not ready: a person may replace it, the operator does not",
			base: persistent,
			breaks: func(v *events.View) {
				v.Workload.UpdateRevision = "new-hash"
				v.Members[1].Ready, v.Members[1].Revision, v.Members[1].NotReadySince = false, "old-hash", v.Now.Add(-2*grace)
				v.Members[2].Ready, v.Members[2].NotReadySince = false, v.Now.Add(-2*grace)
			},
			reason:      machine.ReasonMemberLost,
			message:     "member a-1 cannot come back on its own (BrokenRollout) and member a-2 is not ready: the operator replaces a member only while all the others are ready, so that it never takes two away at once; to replace it anyway, run kubectl delete pod a-1 (it comes back under the same name, on its own disk)",
			progressing: metav1.ConditionFalse,
		},
		{
			name: "the same while still provisioning, with the member above never scheduled",
			base: persistent,
			breaks: func(v *events.View) {
				v.Fleet.Status.State = v1alpha1.StateProvisioning
				v.Workload.UpdateRevision = "new-hash"
				v.Members[1].Ready, v.Members[1].Revision, v.Members[1].NotReadySince = false, "old-hash", v.Now.Add(-2*grace)
				v.Members[2].Ready, v.Members[2].NodeName, v.Members[2].NotReadySince = false, "", v.Now.Add(-grace/4)
			},
			reason:      machine.ReasonMemberLost,
			message:     "member a-1 cannot come back on its own (BrokenRollout) and member a-2 is not ready: the operator replaces a member only while all the others are ready, so that it never takes two away at once; to replace it anyway, run kubectl delete pod a-1 (it comes back under the same name, on its own disk)",
			progressing: metav1.ConditionTrue, requeue: grace * 3 / 4,
		},
		{
			name: "a running member's disk deleted by hand",
			base: persistent,
			breaks: func(v *events.View) {
				v.Disks[1].Terminating = true
			},
			reason: machine.ReasonDiskLost, message: "disks data-a-1 (member a-1) are being deleted or lost, not by the operator", progressing: metav1.ConditionFalse,
			without: "Lost claim",
		},
		{
			name: "a member that cannot start on its Lost claim past the grace period: no heal, a new Pod would mount the same claim",
			base: persistent,
			breaks: func(v *events.View) {
				v.Disks[1].Lost = true
				v.Members[1].Ready, v.Members[1].NotReadySince = false, v.Now.Add(-2*grace)
			},
			reason: machine.ReasonDiskLost, message: "run kubectl delete pvc data-a-1 and the member starts again on a new, empty disk", progressing: metav1.ConditionFalse,
		},
		{
			name: "a running member's volume lost",
			base: persistent,
			breaks: func(v *events.View) {
				v.Disks[0].Lost = true
			},
			reason: machine.ReasonDiskLost, message: "data-a-0 (member a-0)", progressing: metav1.ConditionFalse,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := copyView(c.base)
			c.breaks(&v)
			d := machine.New().Step(&v)
			for _, a := range d.Actions {
				switch a.Kind {
				case machine.DeletePod, machine.DeleteDisk:
					t.Errorf("destructive action %s", a)
				case machine.AppendHistory:
					// The request is recorded (it starts the stabilization window); a step is not.
					for _, d := range a.Decisions {
						if d.Kind == v1alpha1.DecisionShrinkOne {
							t.Errorf("scale-in while a member is not ready: %s", a)
						}
					}
				case machine.Apply:
					t.Errorf("nothing to apply to a fleet whose objects match, got %s", a)
				}
			}
			deg := conditionOf(d.Status, v1alpha1.ConditionDegraded)
			switch {
			case c.reason == "" && deg.Status != metav1.ConditionFalse:
				t.Errorf("Degraded=%s %s: %s; want False", deg.Status, deg.Reason, deg.Message)
			case c.reason != "" && (deg.Status != metav1.ConditionTrue || deg.Reason != c.reason || !strings.Contains(deg.Message, c.message)):
				t.Errorf("Degraded=%s %s: %s\nwant True %s containing %q", deg.Status, deg.Reason, deg.Message, c.reason, c.message)
			case c.without != "" && strings.Contains(deg.Message, c.without):
				t.Errorf("Degraded=%s %s: %s\nwant no %q in it", deg.Status, deg.Reason, deg.Message, c.without)
			}
			if p := conditionOf(d.Status, v1alpha1.ConditionProgressing); p.Status != c.progressing {
				t.Errorf("Progressing=%s %s: %s; want %s", p.Status, p.Reason, p.Message, c.progressing)
			}
			var requeue time.Duration
			for _, a := range d.Actions {
				if a.Kind == machine.Requeue {
					requeue = a.After
				}
			}
			if requeue != c.requeue {
				t.Errorf("requeue after %s; want %s (actions: %s)", requeue, c.requeue, actionKinds(d))
			}
			// A person is told once per reason entered: a Warning Event when the published status
			// does not say it yet, none on the resyncs after it is published.
			var want []string
			if c.reason != "" {
				want = []string{"Warning " + c.reason}
			}
			if got := warnings(d); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("Warning Events %q, want %q", got, want)
			}
			published := copyView(v)
			published.Fleet.Status = d.Status
			if got := warnings(machine.New().Step(&published)); len(got) != 0 {
				t.Errorf("Warning Events %q once the Degraded condition is published, want none (one per transition, not per resync)", got)
			}
			// Nor when the published status says it and is stale in another field: the status is
			// written again, the Event is not.
			stale := copyView(v)
			stale.Fleet.Status = *d.Status.DeepCopy()
			stale.Fleet.Status.Members.Ready++
			if got := warnings(machine.New().Step(&stale)); len(got) != 0 {
				t.Errorf("Warning Events %q with the Degraded condition published and members.ready stale, want none", got)
			}
			if c.reason != "" {
				other := copyView(v)
				other.Fleet.Status = *d.Status.DeepCopy()
				for i := range other.Fleet.Status.Conditions {
					if other.Fleet.Status.Conditions[i].Type == v1alpha1.ConditionDegraded {
						other.Fleet.Status.Conditions[i].Reason = "SomethingElse"
					}
				}
				if got := warnings(machine.New().Step(&other)); strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("Warning Events %q when Degraded for another reason before, want %q", got, want)
				}
			}
			t.Logf("%s: Degraded=%s %s", c.name, deg.Status, deg.Message)
		})
	}
}

// A reservation deleted by hand mid-life is bound again to the fleet that held it, and to no
// other: every fleet naming the bucket ranks the claims the same way from its own observation.
func TestUnreservedBucketGoesToTheStrongestClaim(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	newFleet := func(name string, created time.Time, bound bool) *v1alpha1.CelldFleet {
		f := &v1alpha1.CelldFleet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: metav1.NewTime(created)},
			Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfileBucket, Members: 1, Image: "celld:1",
				Bucket: v1alpha1.BucketSpec{Name: "shared", Region: "eu-west-1"}},
		}
		if bound {
			f.Finalizers = []string{v1alpha1.FleetFinalizer}
		}
		return f
	}
	owner := newFleet("owner", t0.Add(time.Hour), true)    // bound, running, younger
	rival := newFleet("rival", t0, false)                  // refused before, older
	later := newFleet("later", t0.Add(2*time.Hour), false) // refused, youngest
	twin := newFleet("twin", t0, false)                    // as old as the rival
	cases := []struct {
		fleet  *v1alpha1.CelldFleet
		rivals []*v1alpha1.CelldFleet
		binds  bool
		waits  string
	}{
		{owner, []*v1alpha1.CelldFleet{rival, later}, true, ""},
		{rival, []*v1alpha1.CelldFleet{owner, later}, false, "fleet ns/owner"},
		{later, []*v1alpha1.CelldFleet{owner, rival}, false, "fleet ns/owner"},
		// No fleet was ever bound: the oldest binds, then the namespace/name decides.
		{rival, []*v1alpha1.CelldFleet{later, twin}, true, ""},
		{twin, []*v1alpha1.CelldFleet{later, rival}, false, "fleet ns/rival"},
		{later, []*v1alpha1.CelldFleet{rival}, false, "fleet ns/rival"},
		// A fleet on another bucket is no rival.
		{later, []*v1alpha1.CelldFleet{func() *v1alpha1.CelldFleet { f := owner.DeepCopy(); f.Spec.Bucket.Name = "other"; return f }()}, true, ""},
	}
	for _, c := range cases {
		var names []string
		for _, r := range c.rivals {
			names = append(names, r.Name)
		}
		t.Run(fmt.Sprintf("%s among %s", c.fleet.Name, strings.Join(names, ",")), func(t *testing.T) {
			v := events.Normalize("ns", c.fleet.Name, &events.Observation{Now: t0.Add(3 * time.Hour), Fleet: c.fleet, Rivals: c.rivals, NodesSynced: true})
			d := machine.Step(&v)
			binds := false
			for _, a := range d.Actions {
				switch a.Kind {
				case machine.BindReservation:
					binds = true
				case machine.Apply, machine.AddFinalizer:
					if c.waits != "" {
						t.Errorf("a fleet waiting for the bucket must get nothing, got %s", a)
					}
				}
			}
			if binds != c.binds {
				t.Errorf("binds the bucket: %t, want %t (actions: %s)", binds, c.binds, actionKinds(d))
			}
			if c.waits == "" {
				return
			}
			deg, bound := conditionOf(d.Status, v1alpha1.ConditionDegraded), conditionOf(d.Status, v1alpha1.ConditionReservationBound)
			if deg.Status != metav1.ConditionTrue || deg.Reason != machine.ReasonBucketReserved || !strings.Contains(deg.Message, c.waits) ||
				bound.Status != metav1.ConditionFalse || bound.Reason != machine.ReasonBucketReserved {
				t.Errorf("want Degraded=True and ReservationBound=False, reason BucketReserved, naming %s; got %+v / %+v", c.waits, deg, bound)
			}
		})
	}
}

// warnings lists the decision's Warning Events as "Warning Reason", heals apart (they announce a
// Pod delete, not a condition).
func warnings(d machine.Decision) []string {
	var out []string
	for _, a := range d.Actions {
		if a.Kind == machine.RecordEvent && a.EventType == "Warning" && a.Reason != "Healing" {
			out = append(out, a.EventType+" "+a.Reason)
		}
	}
	return out
}
