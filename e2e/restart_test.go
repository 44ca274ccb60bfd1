package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/contract"
)

// TestOperatorKilledMidShrink: the operator, elected leader, is killed (SIGKILL: no lease
// release, no last write) while a scale-in step is rolling out; its successor waits out the lease,
// takes no double step and completes the scale-in one member at a time.
func TestOperatorKilledMidShrink(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	election := []string{"--leader-elect=true", "--leader-election-namespace", f.ns,
		"--leader-election-lease-duration=6s", "--leader-election-renew-deadline=4s", "--leader-election-retry-period=1s"}
	first := f.startOperator(election...)
	sh := f.startShrink("crash")
	first.kill()
	s := f.statefulSet(sh.name)
	t.Logf("operator killed with the StatefulSet at %s (rolled out: %v)", contract.DescribeStatefulSet(s), contract.RolledOut(s))

	f.startOperator(election...)
	t.Logf("a new operator leads")
	fl := sh.finish(f)
	t.Logf("history: %s", formatHistory(f.reservation(fl).Status.CapacityHistory))
}

// shrinkInFlight is a PersistentFleet whose scale-in 5 -> 2 has its first step applied and not
// rolled out: where the tests kill the operator running it.
type shrinkInFlight struct {
	name         string
	sets, claims *recorder
}

// startShrink creates a PersistentFleet at 5 with no scale-in stabilization, waits until it
// converged, asks for 2, and returns once the first step is applied.
func (f *fixture) startShrink(name string) *shrinkInFlight {
	f.t.Helper()
	fl := f.newFleet(name, v1alpha1.ProfilePersistentFleet, 5)
	fl.Spec.Capacity.ScaleInStabilization = duration(0)
	fl = f.create(fl)
	f.waitConverged(fl.Name)
	sh := &shrinkInFlight{name: fl.Name, sets: f.recordStatefulSets(), claims: f.recordClaims()}
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 2 })
	if err := wait.PollUntilContextTimeout(f.ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(ctx, fl.Name, metav1.GetOptions{})
		return err == nil && *s.Spec.Replicas < 5, nil
	}); err != nil {
		f.t.Fatalf("the scale-in did not start: %v", err)
	}
	return sh
}

// finish waits until the fleet converged at 2, and checks that the scale-in took one member per
// step, each after the previous rolled out, and deleted no disk.
func (sh *shrinkInFlight) finish(f *fixture) *v1alpha1.CelldFleet {
	f.t.Helper()
	fl := f.waitConverged(sh.name)
	checkOneStepShrink(f.t, statefulSetChanges(sh.sets.Await(f.t, "rolled out at 2", rolledOutAt(fl.Name, 2)), fl.Name), 5, 2)
	if dels := deletions(sh.claims.Events(f.t)); len(dels) != 0 {
		f.t.Errorf("claims deleted: %v; scale-in keeps a PersistentFleet's disks", names(dels))
	}
	return fl
}
