package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/api/v1alpha1"
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
	fl := f.newFleet("crash", v1alpha1.ProfilePersistentFleet, 5)
	fl.Spec.Capacity.ScaleInStabilization = duration(0)
	fl = f.create(fl)
	f.waitConverged(fl.Name)
	sets, claims := f.recordStatefulSets(), f.recordClaims()

	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 2 })
	// The first step applied and not rolled out yet: the operator is killed there.
	if err := wait.PollUntilContextTimeout(f.ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(ctx, fl.Name, metav1.GetOptions{})
		return err == nil && *s.Spec.Replicas < 5, nil
	}); err != nil {
		t.Fatalf("the scale-in did not start: %v", err)
	}
	first.kill()
	s := f.statefulSet(fl.Name)
	t.Logf("operator killed with the StatefulSet at %s (rolled out: %v)", describeStatefulSet(s), rolledOut(s))

	f.startOperator(election...)
	t.Logf("a new operator leads")
	fl = f.waitConverged(fl.Name)
	checkOneStepShrink(t, statefulSetChanges(sets.await(t, "rolled out at 2", rolledOutAt(fl.Name, 2)), fl.Name), 5, 2)
	if dels := deletions(claims.events(t)); len(dels) != 0 {
		t.Errorf("claims deleted: %v; scale-in keeps a PersistentFleet's disks", names(dels))
	}
	t.Logf("history: %s", formatHistory(f.reservation(fl).Status.CapacityHistory))
}
