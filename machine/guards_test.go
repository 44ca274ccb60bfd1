package machine

import (
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
)

var tp = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func readyPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

func node(ready bool, since time.Time, taints ...string) *corev1.Node {
	s := corev1.ConditionFalse
	if ready {
		s = corev1.ConditionTrue
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s, LastTransitionTime: metav1.NewTime(since)}}}}
	for _, k := range taints {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoExecute})
	}
	return n
}

// TestPremiseRefusesWhatChanged: every fact a premise carries is confirmed on the fresh read; the
// same fresh read passes, and each change the decision did not see refuses, naming it.
func TestPremiseRefusesWhatChanged(t *testing.T) {
	pods := func(names ...string) map[string]*corev1.Pod {
		out := map[string]*corev1.Pod{}
		for _, n := range names {
			out[n] = readyPod(n)
		}
		return out
	}
	workload := Premise{Fleet: "a", FleetGeneration: 3, Workload: true, WorkloadExists: true, WorkloadGeneration: 7, Ready: []string{"a-0", "a-1"}}
	same := Fresh{FleetGeneration: 3, WorkloadExists: true, WorkloadGeneration: 7, Pods: pods("a-0", "a-1")}
	// onNodes: both members ready by their Pods, a-1 on node n1 as given (nil: gone).
	onNodes := func(n1 *corev1.Node) Fresh {
		f := Fresh{FleetGeneration: 3, WorkloadExists: true, WorkloadGeneration: 7, Pods: pods("a-0", "a-1"),
			MemberNodes: map[string]*corev1.Node{"n1": n1}}
		f.Pods["a-1"].Spec.NodeName = "n1"
		return f
	}
	healing := Premise{OnlyNotReady: "a-0"}
	uncordoned := workload
	uncordoned.RolledOut, uncordoned.Uncordoned = true, true
	rolledOutOn := func(n1 *corev1.Node) Fresh {
		f := onNodes(n1)
		f.WorkloadRolledOut = true
		return f
	}
	cordoned := node(true, tp)
	cordoned.Spec.Unschedulable = true
	scaleIn := workload
	scaleIn.RolledOut = true
	gone := Premise{Node: "n1", NodeGone: true, Ready: []string{"a-0"}}
	fenced := Premise{Node: "n1", NodeFenced: true, NodeUnhealthySince: tp, Ready: []string{"a-0"}}
	disk := Premise{NoMembers: true, DiskOf: "fleet-uid", DiskUID: "claim-uid"}
	claim := func(uid, fleet string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-a-0", UID: types.UID(uid), ResourceVersion: "12",
			Labels: map[string]string{kinds.LabelFleetUID: fleet}}}
	}
	lostClaim := Premise{Claim: "data-a-0"}
	lost := claim("claim-uid", "fleet-uid")
	lost.Status.Phase = corev1.ClaimLost
	deleting := claim("claim-uid", "fleet-uid")
	deleting.DeletionTimestamp = &metav1.Time{Time: tp}
	terminating := readyPod("a-1")
	terminating.DeletionTimestamp = &metav1.Time{Time: tp}
	for _, tc := range []struct {
		name    string
		premise Premise
		fresh   Fresh
		refuse  bool
	}{
		{"nothing changed", workload, same, false},
		{"the fleet's spec is newer", workload, Fresh{FleetGeneration: 4, WorkloadExists: true, WorkloadGeneration: 7, Pods: pods("a-0", "a-1")}, true},
		{"the fleet's spec is older", workload, Fresh{FleetGeneration: 2, WorkloadExists: true, WorkloadGeneration: 7, Pods: pods("a-0", "a-1")}, true},
		{"the workload's spec is newer", workload, Fresh{FleetGeneration: 3, WorkloadExists: true, WorkloadGeneration: 8, Pods: pods("a-0", "a-1")}, true},
		{"the workload is gone", workload, Fresh{FleetGeneration: 3, Pods: pods("a-0", "a-1")}, true},
		{"a ready member vanished", workload, Fresh{FleetGeneration: 3, WorkloadExists: true, WorkloadGeneration: 7, Pods: pods("a-0")}, true},
		{"a ready member is terminating", workload, Fresh{FleetGeneration: 3, WorkloadExists: true, WorkloadGeneration: 7,
			Pods: map[string]*corev1.Pod{"a-0": readyPod("a-0"), "a-1": terminating}}, true},
		{"the node is still gone", gone, Fresh{Pods: pods("a-0")}, false},
		{"the node is back, not ready yet", gone, Fresh{Pods: pods("a-0"), Node: node(false, tp.Add(time.Minute))}, true},
		{"the node is back and ready", gone, Fresh{Pods: pods("a-0"), Node: node(true, tp.Add(time.Minute))}, true},
		{"the node is still fenced", fenced, Fresh{Pods: pods("a-0"), Node: node(false, tp, corev1.TaintNodeOutOfService)}, false},
		{"the fence was lifted, the node still down", fenced, Fresh{Pods: pods("a-0"), Node: node(false, tp)}, true},
		{"the node recovered and failed again", fenced, Fresh{Pods: pods("a-0"), Node: node(false, tp.Add(time.Minute), corev1.TaintNodeOutOfService)}, true},
		{"the fenced node is gone now", fenced, Fresh{Pods: pods("a-0")}, false},
		{"a ready member's node is ready", workload, onNodes(node(true, tp)), false},
		{"a ready member's node stopped answering, its Pod still says Ready", workload, onNodes(node(false, tp.Add(time.Minute))), true},
		{"a ready member's node is gone", workload, onNodes(nil), true},
		{"a ready member's node was not read", workload, Fresh{FleetGeneration: 3, WorkloadExists: true, WorkloadGeneration: 7, Pods: onNodes(nil).Pods}, true},
		{"a heal, the other member's node stopped answering", healing, onNodes(node(false, tp.Add(time.Minute))), true},
		{"a heal, the other member's node is ready", healing, onNodes(node(true, tp)), false},
		{"a scale-in, rolled out", scaleIn, Fresh{FleetGeneration: 3, WorkloadExists: true, WorkloadGeneration: 7, WorkloadRolledOut: true, Pods: pods("a-0", "a-1")}, false},
		{"a scale-in, the last change not rolled out by the workload's status", scaleIn, same, true},
		{"a scale-in, a member's node not cordoned", uncordoned, rolledOutOn(node(true, tp)), false},
		{"a scale-in, a member's node cordoned since the decision", uncordoned, rolledOutOn(cordoned), true},
		{"a write that takes no member away, a member's node cordoned", workload, onNodes(cordoned), false},
		{"a disk, the same claim (changed since, by someone)", disk, Fresh{Disk: claim("claim-uid", "fleet-uid")}, false},
		{"a disk already gone", disk, Fresh{}, false},
		{"a disk replaced under its name", disk, Fresh{Disk: claim("other-uid", "fleet-uid")}, true},
		{"a disk relabelled to another fleet", disk, Fresh{Disk: claim("claim-uid", "other-fleet")}, true},
		{"a disk unlabelled", disk, Fresh{Disk: claim("claim-uid", "")}, true},
		{"a disk whose fleet has a member again", disk, Fresh{Disk: claim("claim-uid", "fleet-uid"), Members: 1}, true},
		{"a lost claim's heal, the claim still lost", lostClaim, Fresh{Claim: lost}, false},
		{"a lost claim's heal, the claim gone", lostClaim, Fresh{}, false},
		{"a lost claim's heal, the claim being deleted", lostClaim, Fresh{Claim: deleting}, false},
		{"a lost claim's heal, the claim bound again", lostClaim, Fresh{Claim: claim("claim-uid", "fleet-uid")}, true},
		{"no claim in the premise, a bound claim read", Premise{}, Fresh{Claim: claim("claim-uid", "fleet-uid")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.premise.Check(tc.fresh)
			if tc.refuse != (err != nil) {
				t.Fatalf("refuse=%t, got %v", tc.refuse, err)
			}
			if err != nil && !errors.Is(err, ErrPremiseChanged) {
				t.Fatalf("%v does not wrap ErrPremiseChanged", err)
			}
		})
	}
}

// TestStatusEqualSeesEveryField: a status that differs in any field but a condition's
// lastTransitionTime is a status to publish: a comparison that skips a field leaves it stale.
func TestStatusEqualSeesEveryField(t *testing.T) {
	one := int32(1)
	base := v1alpha1.CelldFleetStatus{State: v1alpha1.StateSteady, Conditions: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "R", Message: "m"}}}
	changes := map[string]func(s *v1alpha1.CelldFleetStatus){
		"ObservedGeneration": func(s *v1alpha1.CelldFleetStatus) { s.ObservedGeneration = 2 },
		"State":              func(s *v1alpha1.CelldFleetStatus) { s.State = v1alpha1.StateGrowing },
		"Members":            func(s *v1alpha1.CelldFleetStatus) { s.Members.Ready = 1 },
		"RecommendedMembers": func(s *v1alpha1.CelldFleetStatus) { s.RecommendedMembers = &one },
		"Selector":           func(s *v1alpha1.CelldFleetStatus) { s.Selector = "x" },
		"BlockedBy":          func(s *v1alpha1.CelldFleetStatus) { s.BlockedBy = "x" },
		"NextAction":         func(s *v1alpha1.CelldFleetStatus) { s.NextAction = "x" },
		"Disks":              func(s *v1alpha1.CelldFleetStatus) { s.Disks = &v1alpha1.DiskAudit{Unused: []string{"d"}} },
		"Rollout":            func(s *v1alpha1.CelldFleetStatus) { s.Rollout = &v1alpha1.RolloutStatus{Revision: "r", Held: true} },
		"Conditions":         func(s *v1alpha1.CelldFleetStatus) { s.Conditions[0].Message = "other" },
	}
	typ := reflect.TypeOf(base)
	for i := 0; i < typ.NumField(); i++ {
		name := typ.Field(i).Name
		change, ok := changes[name]
		if !ok {
			t.Errorf("status field %s: no case; say how it changes", name)
			continue
		}
		b := base
		b.Conditions = append([]metav1.Condition(nil), base.Conditions...)
		change(&b)
		if statusEqual(&base, &b) {
			t.Errorf("a status differing in %s compares equal", name)
		}
	}
	later := base
	later.Conditions = []metav1.Condition{base.Conditions[0]}
	later.Conditions[0].LastTransitionTime = metav1.NewTime(tp)
	if !statusEqual(&base, &later) {
		t.Error("a condition's lastTransitionTime alone must not count as a change")
	}
}

// steadyView is a converged fleet of three, as the machine's world leaves it.
func steadyView(t *testing.T) (*world, events.View) {
	t.Helper()
	r := newRun(t, v1alpha1.ProfilePersistentFleet, 3, map[string]int{})
	for i := 0; i < 40 && !r.done(); i++ {
		r.w.tick()
		r.pass(r.w.observe())
	}
	for i := 0; i < 3; i++ {
		r.pass(r.w.observe())
	}
	if !r.done() {
		t.Fatalf("no convergence: %s", r.shape())
	}
	return r.w, events.Normalize(worldNS, worldName, r.w.observe())
}

// TestQuietAnswersOnlyForTheSameView: the cached "nothing to do" of a converged fleet is never
// the answer to a view that a fresh machine decides otherwise on, whatever single thing changed
// that the Pods do not show yet: a node going down, away, or fenced.
func TestQuietAnswersOnlyForTheSameView(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(w *world, n *corev1.Node)
	}{
		{"node NotReady past the grace period", func(w *world, n *corev1.Node) {
			n.Status.Conditions[0].Status, n.Status.Conditions[0].LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(w.now.Add(-2*worldGrace))
		}},
		{"node fenced", func(w *world, n *corev1.Node) {
			n.Status.Conditions[0].Status, n.Status.Conditions[0].LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(w.now)
			n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}}
		}},
		{"node gone", func(w *world, n *corev1.Node) { delete(w.nodes, n.Name) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, v := steadyView(t)
			m := New()
			if d := m.Step(&v); mutations(d) != "" {
				if d = m.Step(&v); mutations(d) != "" {
					t.Fatalf("the converged fleet still writes: %s", mutations(d))
				}
			}
			tc.change(w, w.nodes[w.pods[worldName+"-1"].Spec.NodeName])
			v2 := events.Normalize(worldNS, worldName, w.observe())
			got, want := m.Step(&v2), New().Step(&v2)
			if mutations(want) == "" {
				t.Fatalf("the change asks for nothing of a fresh machine either: the case proves nothing")
			}
			if mutations(got) != mutations(want) || !statusEqual(&got.Status, &want.Status) {
				t.Errorf("the machine that was quiet decides %s; a fresh one %s", mutations(got), mutations(want))
			}
		})
	}
}

// TestCompletionWaitsForEveryMember: a change in flight completes (and records its size as
// settled) only once every member is ready on a ready node and none is terminating, whatever the
// workload's own counters say.
func TestCompletionWaitsForEveryMember(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(v *events.View)
	}{
		{"a member's node is NotReady", func(v *events.View) {
			n := v.Nodes[v.Members[1].NodeName]
			n.Ready, n.UnhealthySince = false, v.Now
			v.Nodes[v.Members[1].NodeName] = n
		}},
		{"a member is terminating", func(v *events.View) { v.Members[1].Terminating = true }},
		{"a member is not ready", func(v *events.View) { v.Members[1].Ready = false; v.Members[1].NotReadySince = v.Now }},
		{"the workload's controller has not seen the last change", func(v *events.View) { v.Workload.ObservedGeneration = v.Workload.Generation - 1 }},
		{"the workload's controller counts a member not ready yet", func(v *events.View) { v.Workload.ReadyReplicas-- }},
	} {
		for _, from := range []v1alpha1.FleetState{v1alpha1.StateProvisioning, v1alpha1.StateGrowing, v1alpha1.StateShrinkingOne} {
			t.Run(tc.name+" in "+string(from), func(t *testing.T) {
				_, v := steadyView(t)
				v.Nodes = cloneNodes(v.Nodes)
				v.Members = append([]events.Member(nil), v.Members...)
				switch from {
				case v1alpha1.StateProvisioning:
					v.Workload.Settled = -1
				case v1alpha1.StateGrowing:
					v.Workload.Settled = v.Workload.Replicas - 1
				case v1alpha1.StateShrinkingOne:
					v.Workload.Settled = v.Workload.Replicas + 1
				}
				tc.break_(&v)
				d := New().Step(&v)
				if d.From != from {
					t.Fatalf("the view shows %s, want %s", d.From, from)
				}
				for _, tr := range d.Transitions {
					if tr.To == v1alpha1.StateSteady {
						t.Fatalf("%s completes to Steady while %s", from, tc.name)
					}
				}
			})
		}
	}
}

func cloneNodes(in map[string]events.NodeView) map[string]events.NodeView {
	out := make(map[string]events.NodeView, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// TestBucketBoundToAnotherUIDIsRefused: a reservation binds a bucket to a fleet UID, not to a
// name: a fleet recreated under the same name, or another fleet, gets nothing, and with no
// reservation a rival with the stronger claim binds it first.
func TestBucketBoundToAnotherUIDIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  events.ReservationView
	}{
		{"the same name, another UID", events.ReservationView{Exists: true, Name: "bkt", BoundTo: "uid-old", BoundName: "a", BoundNamespace: "ns"}},
		{"another fleet", events.ReservationView{Exists: true, Name: "bkt", BoundTo: "uid-9", BoundName: "b", BoundNamespace: "ns"}},
		{"no reservation, a stronger rival", events.ReservationView{Claimant: &events.Claimant{Namespace: "ns", Name: "b", UID: "uid-9"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fleet(v1alpha1.ProfilePersistentFleet)
			v := events.View{Now: tp, Namespace: "ns", Name: "a", Fleet: f, Reservation: tc.res, NodesSynced: true, Workload: events.WorkloadView{Settled: -1}}
			d := New().Step(&v)
			for _, a := range d.Actions {
				switch a.Kind {
				case Apply, BindReservation, AddFinalizer, AppendHistory, DeletePod, DeleteDisk:
					t.Errorf("a fleet refused its bucket must get nothing, got %s", a)
				}
			}
			var bound bool
			for _, c := range d.Status.Conditions {
				bound = bound || (c.Type == v1alpha1.ConditionReservationBound && c.Status == metav1.ConditionTrue)
			}
			if bound {
				t.Error("ReservationBound=True for a bucket bound elsewhere")
			}
		})
	}
}

// TestHealWaitsForEveryOtherMember: a member that cannot come back (its node is gone) is
// replaced only while every other member is up, whatever way another one is not: not ready,
// terminating, on a node NotReady (its Pod not marked yet), or missing below it.
func TestHealWaitsForEveryOtherMember(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(v *events.View)
	}{
		{"none: the heal goes ahead", func(v *events.View) {}},
		{"another is not ready", func(v *events.View) { v.Members[0].Ready = false; v.Members[0].NotReadySince = v.Now }},
		{"another is terminating", func(v *events.View) { v.Members[0].Terminating = true }},
		{"another's node is NotReady", func(v *events.View) {
			n := v.Nodes[v.Members[0].NodeName]
			n.Ready, n.UnhealthySince = false, v.Now
			v.Nodes[v.Members[0].NodeName] = n
		}},
		{"another, below it, is missing", func(v *events.View) { v.Members = v.Members[1:] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, v := steadyView(t)
			v.Nodes = cloneNodes(v.Nodes)
			v.Members = append([]events.Member(nil), v.Members...)
			delete(v.Nodes, v.Members[2].NodeName)
			tc.break_(&v)
			d := New().Step(&v)
			heals := 0
			for _, a := range d.Actions {
				if a.Kind == DeletePod {
					heals++
				}
			}
			want := 0
			if tc.name == "none: the heal goes ahead" {
				want = 1
			}
			if heals != want || (d.To == v1alpha1.StateHealing) != (want == 1) {
				t.Fatalf("%d deletions, state %s; want %d", heals, d.To, want)
			}
		})
	}
}

// TestNoHealForWhatCanComeBack: a member is replaced only when it cannot come back on its own:
// not while its node's kubelet will finish it, not within the grace period, not on a node only
// missing from a cache that has not synced, not on a node that is only unreachable.
func TestNoHealForWhatCanComeBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(v *events.View)
	}{
		{"terminating on a ready node, its claim lost long ago", func(v *events.View) {
			v.Members[1].Terminating, v.Members[1].Ready, v.Members[1].NotReadySince = true, false, v.Now.Add(-time.Hour)
			v.Disks = append([]events.Disk(nil), v.Disks...)
			for i := range v.Disks {
				if v.Disks[i].Name == v.Members[1].ClaimName {
					v.Disks[i].Lost = true
				}
			}
		}},
		{"its claim lost, within the grace period", func(v *events.View) {
			v.Members[1].Ready, v.Members[1].NotReadySince = false, v.Now.Add(-worldGrace/2)
			v.Disks = append([]events.Disk(nil), v.Disks...)
			for i := range v.Disks {
				if v.Disks[i].Name == v.Members[1].ClaimName {
					v.Disks[i].Lost = true
				}
			}
		}},
		{"not ready on the current template, long ago", func(v *events.View) {
			v.Members[1].Ready, v.Members[1].NotReadySince = false, v.Now.Add(-time.Hour)
		}},
		{"its node missing from a node cache not synced yet", func(v *events.View) {
			v.NodesSynced = false
			delete(v.Nodes, v.Members[1].NodeName)
		}},
		{"its node unreachable long ago, not fenced", func(v *events.View) {
			n := v.Nodes[v.Members[1].NodeName]
			n.Ready, n.UnhealthySince = false, v.Now.Add(-time.Hour)
			v.Nodes[v.Members[1].NodeName] = n
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, v := steadyView(t)
			v.Nodes = cloneNodes(v.Nodes)
			v.Members = append([]events.Member(nil), v.Members...)
			tc.break_(&v)
			for _, a := range New().Step(&v).Actions {
				if a.Kind == DeletePod {
					t.Fatalf("%s: %s", tc.name, a)
				}
			}
		})
	}
}
