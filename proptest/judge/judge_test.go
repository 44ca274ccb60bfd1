package judge_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/proptest/harness"
	"github.com/celld/celld-operator/proptest/judge"
)

// partitioned returns a world with a converged three-member PersistentFleet, one of whose nodes
// is now partitioned: unreachable, its member still running.
func partitioned(t *testing.T) (*harness.World, string, string) {
	t.Helper()
	w := harness.NewWorld(6, 1)
	must(t, w.CreateFleet(harness.FleetSpec{Name: "alpha", Profile: v1alpha1.ProfilePersistentFleet, Members: 3, Bucket: "b", Grace: 20 * time.Second}))
	must(t, w.Converge())
	pod := w.C.Pod(harness.Namespace, "alpha-1")
	must(t, w.C.SetNodeUnreachable(pod.Spec.NodeName))
	w.C.Advance(time.Minute)
	w.C.Settle()
	return w, pod.Name, pod.Spec.NodeName
}

// TestTwoCopiesAreFlagged: a member's Pod removed from the API while its node is partitioned
// leaves its process running; once the StatefulSet runs the replacement, two copies of the member
// run, and the judge says so, whoever removed the Pod. Fencing the node ends it.
func TestTwoCopiesAreFlagged(t *testing.T) {
	w, pod, node := partitioned(t)
	j := judge.New(w.C)
	must(t, j.Round())
	must(t, w.C.ForceDelete(sim.KindPod, harness.Namespace, pod))
	w.C.Settle()
	if p := w.C.Pod(harness.Namespace, pod); p == nil || p.Spec.NodeName == node {
		t.Fatalf("the StatefulSet did not replace %s elsewhere: %v", pod, p)
	}
	err := j.Round()
	var v *judge.Violation
	if !errors.As(err, &v) || v.Clause != judge.C3PodDeletedOnlyToHeal || !strings.Contains(v.Detail, "two copies") {
		t.Fatalf("want two copies of %s flagged, got %v", pod, err)
	}
	must(t, w.C.FenceNode(node))
	w.C.Settle()
	must(t, j.Round())
}

// TestForceOnUnfencedNodeIsFlagged: the operator's force-delete of a member whose node is
// unreachable but not fenced breaks clause 3, past the grace period or not; on a fenced node it
// is what fencing is for.
func TestForceOnUnfencedNodeIsFlagged(t *testing.T) {
	w, pod, _ := partitioned(t)
	j := judge.New(w.C)
	must(t, j.Round())
	p := w.C.Pod(harness.Namespace, pod)
	must(t, w.C.Do(heal(p.Name, string(p.UID), p.ResourceVersion)))
	err := j.Round()
	var v *judge.Violation
	if !errors.As(err, &v) || !strings.Contains(v.Detail, "not fenced") {
		t.Fatalf("want the force-delete on an unfenced node flagged, got %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
