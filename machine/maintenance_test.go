package machine_test

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
)

// drained is a converged fleet's view with its member i taken away by a drain of its node, in
// one of the ways a drain leaves it: being evicted, or recreated and waiting for a node.
func drained(t *testing.T, base events.View, i int, how string) (events.View, string) {
	t.Helper()
	v := copyView(base)
	v.Nodes = map[string]events.NodeView{}
	for k, n := range base.Nodes {
		v.Nodes[k] = n
	}
	m := &v.Members[i]
	node := m.NodeName
	n := v.Nodes[node]
	n.Cordoned = true
	v.Nodes[node] = n
	// Long past any grace period: maintenance is never a stuck member.
	since := v.Now.Add(-time.Hour)
	switch how {
	case "evicted":
		m.Terminating, m.Ready, m.NotReadySince, m.DeletionTime = true, false, since, v.Now.Add(30*time.Second)
		m.Disruption = events.DisruptionEviction
	case "waits", "unplaced":
		m.UID, m.ResourceVersion = "recreated", "9999"
		m.NodeName, m.Ready, m.NotReadySince = "", false, since
		m.Unschedulable = "0/5 nodes are available: 1 node(s) had volume node affinity conflict, 1 node(s) were unschedulable"
		for j := range v.Disks {
			if d := &v.Disks[j]; d.Name == m.ClaimName && how == "waits" {
				d.Node = node
			}
		}
	}
	v.Workload.ReadyReplicas--
	return v, node
}

func actionsOf(d machine.Decision, kind machine.ActionKind) []machine.Action {
	var out []machine.Action
	for _, a := range d.Actions {
		if a.Kind == kind {
			out = append(out, a)
		}
	}
	return out
}

// A member a drain takes away is maintenance, not a fault: the fleet names the member and the
// node and what it waits for, heals and deletes nothing, never calls it stuck however long it
// lasts, tells of each eviction once, and says that only uncordoning ends a wait for a node.
func TestDrainedMemberIsNamedWithItsNode(t *testing.T) {
	persistent := convergedFleet(t, v1alpha1.ProfilePersistentFleet)
	bucket := convergedFleet(t, v1alpha1.ProfileBucket)
	cases := []struct {
		name, how  string
		base       events.View
		reason     string
		status     metav1.ConditionStatus
		wantInText []string
	}{
		{"evicted StatefulSet member", "evicted", persistent, machine.ReasonMemberEvicted, metav1.ConditionTrue,
			[]string{"is being evicted from node {node} by a drain"}},
		{"evicted Deployment member", "evicted", bucket, machine.ReasonMemberEvicted, metav1.ConditionTrue,
			[]string{"is being evicted from node {node} by a drain"}},
		{"member whose disk is on the cordoned node", "waits", persistent, machine.ReasonWaitingForNode, metav1.ConditionFalse,
			[]string{"waits for node {node}, which is cordoned", "kubectl uncordon {node}"}},
		{"member no node takes while one is cordoned", "unplaced", bucket, machine.ReasonWaitingForNode, metav1.ConditionFalse,
			[]string{"cannot be placed while nodes {node} are cordoned", "volume node affinity conflict"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, node := drained(t, c.base, 1, c.how)
			name := v.Members[1].Name
			m := machine.New()
			d := m.Step(&v)
			for _, a := range d.Actions {
				switch a.Kind {
				case machine.DeletePod, machine.DeleteDisk, machine.Apply, machine.ResizeDisk, machine.RecreateWorkload:
					t.Errorf("maintenance made the operator act: %s %s", a.Kind, a.Key)
				}
			}
			p := conditionOf(d.Status, v1alpha1.ConditionProgressing)
			if p.Reason != c.reason || p.Status != c.status {
				t.Errorf("Progressing %s (%s): %s; want %s %s", p.Status, p.Reason, p.Message, c.status, c.reason)
			}
			texts := map[string]string{"Progressing": p.Message, "blockedBy": d.Status.BlockedBy,
				"Ready": conditionOf(d.Status, v1alpha1.ConditionReady).Message}
			for where, text := range texts {
				if !strings.Contains(text, "member "+name) {
					t.Errorf("%s does not name member %s: %q", where, name, text)
				}
				for _, want := range c.wantInText {
					if want = strings.ReplaceAll(want, "{node}", node); !strings.Contains(text, want) {
						t.Errorf("%s does not say %q: %q", where, want, text)
					}
				}
			}
			if deg := conditionOf(d.Status, v1alpha1.ConditionDegraded); deg.Status != metav1.ConditionFalse {
				t.Errorf("Degraded %s (%s): %s; maintenance is no fault", deg.Status, deg.Reason, deg.Message)
			}
			if r := conditionOf(d.Status, v1alpha1.ConditionReady); r.Status != metav1.ConditionFalse {
				t.Errorf("Ready %s with member %s away", r.Status, name)
			}
			told := actionsOf(d, machine.RecordEvent)
			evictedEvents := 0
			for _, a := range told {
				if a.Reason == machine.ReasonMemberEvicted {
					evictedEvents++
					if !strings.Contains(a.Message, "member "+name) || !strings.Contains(a.Message, "node "+node) {
						t.Errorf("the eviction's Event does not name member and node: %q", a.Message)
					}
				}
			}
			if want := map[bool]int{true: 1}[c.how == "evicted"]; evictedEvents != want {
				t.Errorf("%d MemberEvicted Events; want %d", evictedEvents, want)
			}

			// Told once: the next step on a view that changed otherwise tells nothing new.
			m.Advance(d.Actions, v.Now)
			v2 := copyView(v)
			v2.Now = v.Now.Add(time.Minute)
			v2.Members[0].ResourceVersion += "1"
			for _, a := range m.Step(&v2).Actions {
				if a.Kind == machine.RecordEvent && a.Reason == machine.ReasonMemberEvicted {
					t.Errorf("the eviction of %s told twice: %q", name, a.Message)
				}
			}
		})
	}
}

// The node back, or never cordoned, it is no maintenance: a member no node takes is stuck past
// the grace period as before, and the fleet says so.
func TestUnplacedMemberWithNoNodeCordonedIsStuck(t *testing.T) {
	v, node := drained(t, convergedFleet(t, v1alpha1.ProfilePersistentFleet), 1, "waits")
	n := v.Nodes[node]
	n.Cordoned = false
	v.Nodes[node] = n
	v.Fleet.Spec.Healing.UnreachableGracePeriod = &metav1.Duration{Duration: time.Minute}
	d := machine.New().Step(&v)
	if p := conditionOf(d.Status, v1alpha1.ConditionProgressing); p.Reason == machine.ReasonWaitingForNode {
		t.Errorf("Progressing %s with no node cordoned: %s", p.Reason, p.Message)
	}
	if deg := conditionOf(d.Status, v1alpha1.ConditionDegraded); deg.Reason != machine.ReasonMemberStuck {
		t.Errorf("Degraded %s (%s): %s; want MemberStuck", deg.Status, deg.Reason, deg.Message)
	}
}

// A member the scheduler turned down before it weighed any node (its claim cannot bind) is not
// maintenance's, though a node is cordoned meanwhile: no uncordon would place it, and past the
// grace period the fleet says it is stuck rather than waiting for the node. With the cordoned
// node among the refusal's reasons it is maintenance's, never stuck.
func TestUnplacedMemberTheCordonDidNotRefuseIsStuck(t *testing.T) {
	for _, tc := range []struct {
		refusal string
		stuck   bool
	}{
		{"0/10 nodes are available: pod has unbound immediate PersistentVolumeClaims.", true},
		{`0/10 nodes are available: persistentvolumeclaim "data-a-1" not found.`, true},
		{"0/10 nodes are available: 1 node(s) were unschedulable, 9 node(s) didn't match pod anti-affinity rules.", false},
	} {
		v, node := drained(t, convergedFleet(t, v1alpha1.ProfilePersistentFleet), 1, "unplaced")
		v.Members[1].Unschedulable = tc.refusal
		v.Fleet.Spec.Healing.UnreachableGracePeriod = &metav1.Duration{Duration: time.Minute}
		d := machine.New().Step(&v)
		p, deg := conditionOf(d.Status, v1alpha1.ConditionProgressing), conditionOf(d.Status, v1alpha1.ConditionDegraded)
		if got := deg.Reason == machine.ReasonMemberStuck; got != tc.stuck {
			t.Errorf("%q, node %s cordoned: Degraded %s (%s) %q; want stuck %t", tc.refusal, node, deg.Status, deg.Reason, deg.Message, tc.stuck)
		}
		if tc.stuck && (p.Reason == machine.ReasonWaitingForNode || strings.Contains(p.Message, "uncordon")) {
			t.Errorf("%q: Progressing %s %q; the cordon is not what holds it", tc.refusal, p.Reason, p.Message)
		}
		if !tc.stuck && p.Reason != machine.ReasonWaitingForNode {
			t.Errorf("%q: Progressing %s %q; want %s", tc.refusal, p.Reason, p.Message, machine.ReasonWaitingForNode)
		}
	}
}

// A one-member fleet's member evicted: the budget allowed it, and the fleet says it is down.
func TestDrainOfOnlyMemberSaysTheFleetIsDown(t *testing.T) {
	base := copyView(convergedFleet(t, v1alpha1.ProfileBucket))
	base.Fleet.Spec.Members = 1
	base.Members = base.Members[:1]
	base.Workload.Replicas, base.Workload.ReadyReplicas, base.Workload.StatusReplicas, base.Workload.UpdatedReplicas = 1, 1, 1, 1
	v, _ := drained(t, base, 0, "evicted")
	d := machine.New().Step(&v)
	if p := conditionOf(d.Status, v1alpha1.ConditionProgressing); !strings.Contains(p.Message, "only member, so the fleet is down until it is back") {
		t.Errorf("Progressing %s: %q; want it to say the fleet is down", p.Reason, p.Message)
	}
}

// A scale-in waits while a member's node is cordoned, every member still Ready: a drain cordons
// first and evicts next, and the eviction and the scale-in would each take a member away. The
// status names the node and the member; the node uncordoned, the scale-in goes, on a premise
// that refuses it should a drain have cordoned a member's node since.
func TestScaleInWaitsWhileAMemberNodeIsCordoned(t *testing.T) {
	base := copyView(convergedFleet(t, v1alpha1.ProfilePersistentFleet))
	base.Fleet.Spec.Members = 2
	base.Fleet.Spec.Capacity.ScaleInStabilization = &metav1.Duration{}
	lowers := func(d machine.Decision) *machine.Action {
		for _, a := range actionsOf(d, machine.Apply) {
			if s, ok := a.Object.(*appsv1.StatefulSet); ok && *s.Spec.Replicas < 3 {
				return &a
			}
		}
		return nil
	}
	for i := range base.Members {
		v := copyView(base)
		v.Nodes = map[string]events.NodeView{}
		for k, n := range base.Nodes {
			v.Nodes[k] = n
		}
		node := v.Members[i].NodeName
		n := v.Nodes[node]
		n.Cordoned = true
		v.Nodes[node] = n
		d := machine.New().Step(&v)
		if a := lowers(d); a != nil {
			t.Errorf("member %s's node %s cordoned: the scale-in went (%s)", v.Members[i].Name, node, a.Key)
		}
		if want := "node " + node + ", where member " + v.Members[i].Name + " runs, to be uncordoned"; !strings.Contains(d.Status.BlockedBy, want) {
			t.Errorf("blockedBy %q; want it to say %q", d.Status.BlockedBy, want)
		}
	}
	d := machine.New().Step(&base)
	a := lowers(d)
	if a == nil {
		t.Fatalf("no node cordoned: no scale-in; blockedBy %q", d.Status.BlockedBy)
	}
	if a.Premise == nil || !a.Premise.Uncordoned || len(a.Premise.Nodes) == 0 {
		t.Errorf("the scale-in's premise does not ask for its members' nodes uncordoned: %+v", a.Premise)
	}
}
