package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/render"
)

// A heal decided on a cache that lags is confirmed with fresh reads first: a node that is ready
// again, or another member no longer ready, refuses the delete.
func TestHealConfirmsItsPremise(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team", UID: "fleet-uid"}}
	member := func(name string, ready bool) *corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: "uid-" + types.UID(name), ResourceVersion: "7", Labels: render.SelectorLabels(f)},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	node := func(ready corev1.ConditionStatus, fenced bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(since)}}}}
		if fenced {
			n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}}
		}
		return n
	}
	// memberOn is a ready member on a node of its own, named, in the given state.
	memberOn := func(nodeName string) *corev1.Pod {
		p := member("alpha-1", true)
		p.Spec.NodeName = nodeName
		return p
	}
	otherNode := func(ready corev1.ConditionStatus) *corev1.Node {
		n := node(ready, false)
		n.Name = "n2"
		return n
	}
	fenced := machine.Action{Kind: machine.DeletePod, Key: "heal", Ref: kinds.Ref{Namespace: "team", Name: "alpha-0"}, UID: "uid-alpha-0", ResourceVersion: "7", Force: true,
		Premise: &machine.Premise{Node: "n1", NodeFenced: true, NodeUnhealthySince: since, Ready: []string{"alpha-1"}}}
	gone := fenced
	gone.Premise = &machine.Premise{Node: "n1", NodeGone: true, Ready: []string{"alpha-1"}}
	graceful := fenced
	graceful.Force = false
	graceful.Premise = &machine.Premise{Node: "n1", NodeUnhealthySince: since, Ready: []string{"alpha-1"}}
	for _, tc := range []struct {
		name    string
		heal    machine.Action
		objs    []runtime.Object
		refused bool
	}{
		{"node still fenced, other member ready", fenced, []runtime.Object{node(corev1.ConditionUnknown, true), member("alpha-1", true)}, false},
		{"node no longer fenced", fenced, []runtime.Object{node(corev1.ConditionUnknown, false), member("alpha-1", true)}, true},
		{"node fenced and ready", fenced, []runtime.Object{node(corev1.ConditionTrue, true), member("alpha-1", true)}, false},
		{"other member no longer ready", fenced, []runtime.Object{node(corev1.ConditionUnknown, true), member("alpha-1", false)}, true},
		{"other member ready, its node ready", fenced, []runtime.Object{node(corev1.ConditionUnknown, true), memberOn("n2"), otherNode(corev1.ConditionTrue)}, false},
		{"other member ready by its Pod, its node stopped answering", fenced, []runtime.Object{node(corev1.ConditionUnknown, true), memberOn("n2"), otherNode(corev1.ConditionUnknown)}, true},
		{"other member ready by its Pod, its node gone", fenced, []runtime.Object{node(corev1.ConditionUnknown, true), memberOn("n2")}, true},
		{"fenced node gone", fenced, []runtime.Object{member("alpha-1", true)}, false},
		{"node gone", gone, []runtime.Object{member("alpha-1", true)}, false},
		{"node back", gone, []runtime.Object{node(corev1.ConditionUnknown, false), member("alpha-1", true)}, true},
		{"graceful, node still unreachable", graceful, []runtime.Object{node(corev1.ConditionUnknown, false), member("alpha-1", true)}, false},
		{"graceful, node ready again", graceful, []runtime.Object{node(corev1.ConditionTrue, false), member("alpha-1", true)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(append([]runtime.Object{member("alpha-0", false)}, tc.objs...)...)
			err := fx.ap.Do(context.Background(), &Target{Fleet: f}, tc.heal)
			if tc.refused != errors.Is(err, machine.ErrPremiseChanged) || tc.refused == sent[k8stesting.DeleteActionImpl](fx) {
				t.Fatalf("refused=%t: err %v, deleted %t", tc.refused, err, sent[k8stesting.DeleteActionImpl](fx))
			}
		})
	}
}

// The driver never force-deletes on a node that is not known dead, whatever the machine asks:
// a force-delete without a premise that the node is gone or fenced is refused before any request.
func TestForceNeedsAFencedNode(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "alpha-1", Namespace: "team", UID: "uid-pod", ResourceVersion: "42"}}
	for _, p := range []*machine.Premise{nil, {}, {Node: "n1"}, {Node: "n1", NodeUnhealthySince: time.Now()}} {
		fx := newFixture(pod.DeepCopy())
		a := machine.Action{Kind: machine.DeletePod, Key: "heal", Ref: kinds.Ref{Namespace: "team", Name: "alpha-1"}, UID: "uid-pod", ResourceVersion: "42", Force: true, Premise: p}
		if err := fx.ap.Do(context.Background(), &Target{}, a); err == nil || sent[k8stesting.DeleteActionImpl](fx) {
			t.Errorf("premise %+v: force-delete went out (err %v, requests %v)", p, err, fx.requests())
		}
	}
}

// A workload write is confirmed with fresh reads of the fleet and the workload: a size the user
// changed since, or a workload the cache has not caught up with, refuses the write, which a cache
// behind the API server would otherwise turn into a raise past the target or a fall by more than
// one member.
func TestWorkloadWriteConfirmsItsPremise(t *testing.T) {
	fleet := func(generation int64) *v1alpha1.CelldFleet {
		f := testFleet(v1alpha1.ProfileBucket)
		f.Generation = generation
		return f
	}
	deployment := func(generation int64) runtime.Object {
		d := render.Render(fleet(2), 5, -1).Deployment.DeepCopy()
		d.Generation = generation
		return d
	}
	write := func(p machine.Premise) machine.Action {
		f := fleet(2)
		d := render.Render(f, 5, -1).Deployment
		p.Fleet = f.Name
		return machine.Action{Kind: machine.Apply, Key: "apply/deployment", Ref: kinds.Ref{Namespace: f.Namespace, Name: d.Name}, Object: d, Premise: &p}
	}
	for _, tc := range []struct {
		name    string
		objs    []runtime.Object
		premise machine.Premise
		refused string
	}{
		{"created as decided", []runtime.Object{fleet(2)},
			machine.Premise{FleetGeneration: 2, Workload: true}, ""},
		{"the user changed the size since", []runtime.Object{fleet(3)},
			machine.Premise{FleetGeneration: 2, Workload: true}, "the fleet's spec changed since the decision (generation 3, decided on 2)"},
		{"the workload exists though the cache has none", []runtime.Object{fleet(2), deployment(1)},
			machine.Premise{FleetGeneration: 2, Workload: true}, "the workload exists (generation 1) though the decision saw none"},
		{"the workload changed since", []runtime.Object{fleet(2), deployment(5)},
			machine.Premise{FleetGeneration: 2, Workload: true, WorkloadExists: true, WorkloadGeneration: 4}, "the workload's spec changed since the decision (generation 5, decided on 4)"},
		{"the workload is gone", []runtime.Object{fleet(2)},
			machine.Premise{FleetGeneration: 2, Workload: true, WorkloadExists: true, WorkloadGeneration: 4}, "the workload is gone since the decision"},
		{"resized as decided", []runtime.Object{fleet(2), deployment(4)},
			machine.Premise{FleetGeneration: 2, Workload: true, WorkloadExists: true, WorkloadGeneration: 4}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(tc.objs...)
			err := fx.ap.Do(context.Background(), &Target{Fleet: fleet(2)}, write(tc.premise))
			switch {
			case tc.refused == "" && (err != nil || !sent[k8stesting.PatchActionImpl](fx)):
				t.Fatalf("want the write applied: err %v, patched %t", err, sent[k8stesting.PatchActionImpl](fx))
			case tc.refused != "" && (!errors.Is(err, machine.ErrPremiseChanged) || !strings.Contains(err.Error(), tc.refused) || sent[k8stesting.PatchActionImpl](fx)):
				t.Fatalf("want the write refused with %q: err %v, patched %t", tc.refused, err, sent[k8stesting.PatchActionImpl](fx))
			}
		})
	}
}

// sent reports whether the fixture's clients received a request of type A.
func sent[A k8stesting.Action](fx *fixture) bool {
	for _, r := range fx.requests() {
		if _, ok := r.(A); ok {
			return true
		}
	}
	return false
}

// A heal reads the workload its premise names, though it writes a Pod: a workload changed since the
// decision (a grow the step before applied, which a lagging cache does not show yet) may have its
// controller acting on it, so the member is not taken away; a premise naming no workload is an
// error, never a delete on an unconfirmed premise.
func TestHealConfirmsTheWorkload(t *testing.T) {
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team", UID: "fleet-uid"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "alpha-1", Namespace: "team", UID: "uid-pod", ResourceVersion: "7"}}
	sts := func(gen int64) runtime.Object {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team", Generation: gen}}
	}
	deploy := func(gen int64) runtime.Object {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team", Generation: gen}}
	}
	heal := func(ref kinds.Ref, exists bool) machine.Action {
		return machine.Action{Kind: machine.DeletePod, Key: "heal", Ref: kinds.Ref{Kind: kinds.Pod, Namespace: "team", Name: "alpha-1"}, UID: "uid-pod", ResourceVersion: "7",
			Premise: &machine.Premise{Workload: true, WorkloadExists: exists, WorkloadGeneration: 4, WorkloadRef: ref}}
	}
	stsRef, deployRef := kinds.Ref{Kind: kinds.StatefulSet, Name: "alpha"}, kinds.Ref{Kind: kinds.Deployment, Name: "alpha"}
	for _, tc := range []struct {
		name    string
		heal    machine.Action
		objs    []runtime.Object
		refused string
	}{
		{"the StatefulSet as decided on", heal(stsRef, true), []runtime.Object{sts(4)}, ""},
		{"the StatefulSet changed since", heal(stsRef, true), []runtime.Object{sts(5)}, "the workload's spec changed since the decision (generation 5, decided on 4)"},
		{"the StatefulSet gone", heal(stsRef, true), nil, "the workload is gone since the decision"},
		{"another kind's object of that name is not read", heal(stsRef, true), []runtime.Object{deploy(4)}, "the workload is gone since the decision"},
		{"the Deployment as decided on", heal(deployRef, true), []runtime.Object{deploy(4)}, ""},
		{"the Deployment changed since", heal(deployRef, true), []runtime.Object{deploy(6)}, "generation 6, decided on 4"},
		{"no workload, as decided on", heal(stsRef, false), nil, ""},
		{"a workload the decision did not see", heal(stsRef, false), []runtime.Object{sts(1)}, "the workload exists (generation 1) though the decision saw none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(append([]runtime.Object{pod.DeepCopy()}, tc.objs...)...)
			err := fx.ap.Do(context.Background(), &Target{Fleet: f}, tc.heal)
			deleted := sent[k8stesting.DeleteActionImpl](fx)
			switch {
			case tc.refused == "" && (err != nil || !deleted):
				t.Fatalf("want the delete sent: err %v, deleted %t", err, deleted)
			case tc.refused != "" && (!errors.Is(err, machine.ErrPremiseChanged) || !strings.Contains(err.Error(), tc.refused) || deleted):
				t.Fatalf("want refused with %q: err %v, deleted %t", tc.refused, err, deleted)
			}
		})
	}
	for _, ref := range []kinds.Ref{{}, {Kind: kinds.Pod, Name: "alpha"}, {Kind: kinds.StatefulSet}} {
		fx := newFixture(pod.DeepCopy(), sts(4))
		if err := fx.ap.Do(context.Background(), &Target{Fleet: f}, heal(ref, true)); err == nil || sent[k8stesting.DeleteActionImpl](fx) {
			t.Errorf("workload premise naming %q: err %v, deleted %t; want an error and no delete", ref, err, sent[k8stesting.DeleteActionImpl](fx))
		}
	}
}
