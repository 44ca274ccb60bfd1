package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/machine"
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
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: "uid-" + types.UID(name), ResourceVersion: "7", Labels: machine.SelectorLabels(f)},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	node := func(ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(since)}}}}
	}
	heal := machine.Action{Kind: machine.DeletePod, Key: "heal", Namespace: "team", Name: "alpha-0", UID: "uid-alpha-0", ResourceVersion: "7", Force: true,
		Premise: &machine.Premise{Node: "n1", NodeUnhealthySince: since, Ready: []string{"alpha-1"}}}
	deleted := func(fx *fixture) bool {
		for _, r := range fx.requests() {
			if _, ok := r.(k8stesting.DeleteActionImpl); ok {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		name    string
		objs    []runtime.Object
		refused bool
	}{
		{"node still unreachable, other member ready", []runtime.Object{node(corev1.ConditionUnknown), member("alpha-1", true)}, false},
		{"node ready again", []runtime.Object{node(corev1.ConditionTrue), member("alpha-1", true)}, true},
		{"other member no longer ready", []runtime.Object{node(corev1.ConditionUnknown), member("alpha-1", false)}, true},
		{"node gone", []runtime.Object{member("alpha-1", true)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(append([]runtime.Object{member("alpha-0", false)}, tc.objs...)...)
			err := fx.ap.Do(context.Background(), &Target{Fleet: f}, heal)
			if tc.refused != errors.Is(err, machine.ErrPremiseChanged) || tc.refused == deleted(fx) {
				t.Fatalf("refused=%t: err %v, deleted %t", tc.refused, err, deleted(fx))
			}
		})
	}
}
