package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/e2e/contract"
)

const (
	// operatorLeaseName is the Lease `celld-operator run --leader-elect` holds.
	operatorLeaseName = "celld-operator"
	// The election's timing in this test, and client-go's jitter on the retry period: a replica
	// tries the lease every failoverRetryPeriod to failoverRetryPeriod*(1+leaderElectionJitter).
	failoverLeaseDuration = 6 * time.Second
	failoverRenewDeadline = 4 * time.Second
	failoverRetryPeriod   = 1 * time.Second
	leaderElectionJitter  = 1.2
)

// TestLeaderFailover: two replicas run with leader election; the leader is killed (SIGKILL: no
// release of the lease) while the first step of a scale-in 5 -> 2 is rolling out. The standby,
// whose caches are warm, takes the lease within the lease duration and a retry period, and
// finishes the scale-in one member per step, with no double step and no disk deleted.
func TestLeaderFailover(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	election := []string{"--leader-elect=true", "--leader-election-namespace", f.ns,
		"--leader-election-lease-duration=" + failoverLeaseDuration.String(), "--leader-election-renew-deadline=" + failoverRenewDeadline.String(),
		"--leader-election-retry-period=" + failoverRetryPeriod.String()}
	ops := []*operator{f.startOperator(election...), f.startOperator(election...)}
	ids := []string{f.operatorIdentity(ops[0]), f.operatorIdentity(ops[1])}
	lease := f.waitOperatorLease("one of the replicas holds the lease", func(l *coordinationv1.Lease) bool {
		return leaseHolder(l) == ids[0] || leaseHolder(l) == ids[1]
	})
	leader, standby := 0, 1
	if leaseHolder(lease) == ids[1] {
		leader, standby = 1, 0
	}
	t.Logf("leader %s (pid %d), standby %s (pid %d)", ids[leader], ops[leader].Cmd.Process.Pid, ids[standby], ops[standby].Cmd.Process.Pid)

	sh := f.startShrink("failover")
	killed := time.Now()
	ops[leader].kill()
	s := f.statefulSet(sh.name)
	t.Logf("leader killed with the StatefulSet at %s (rolled out: %v)", contract.DescribeStatefulSet(s), contract.RolledOut(s))

	// The takeover, seen by polling the Lease, and as the new holder recorded it.
	lease = f.waitOperatorLease("the standby holds the lease", func(l *coordinationv1.Lease) bool { return leaseHolder(l) == ids[standby] })
	seen := time.Since(killed)
	takeover := seen
	if at := lease.Spec.AcquireTime; at != nil {
		takeover = at.Sub(killed)
	}
	// The standby notices the last renewal up to one of its retries late, and the lease expired
	// up to one retry early; a second of slack for the API server and a loaded machine.
	maxRetry := time.Duration(float64(failoverRetryPeriod) * (1 + leaderElectionJitter))
	bound := failoverLeaseDuration + 2*maxRetry + time.Second
	t.Logf("takeover: %s from the kill to the standby's acquireTime (seen on the Lease after %s; lease duration %s, bound %s); transitions %d",
		takeover.Round(time.Millisecond), seen.Round(time.Millisecond), failoverLeaseDuration, bound, leaseTransitions(lease))
	if takeover > bound {
		t.Errorf("takeover took %s, over %s (lease duration %s + twice the longest retry %s + 1s)", takeover, bound, failoverLeaseDuration, maxRetry)
	}
	if takeover < 0 {
		t.Errorf("the standby acquired the lease %s before the leader was killed", -takeover)
	}

	sh.finish(f)
	if leaseHolder(f.operatorLease()) != ids[standby] {
		t.Errorf("the lease changed hands again: held by %q", leaseHolder(f.operatorLease()))
	}
	select {
	case <-ops[standby].Exited:
		t.Errorf("the new leader exited: %s", ops[standby].Cmd.ProcessState)
	default:
	}
}

// identity reads the leader-election identity an operator logged when it started to wait for the
// lease: host + "_" + a UUID, unknowable from outside the process otherwise.
func (f *fixture) operatorIdentity(op *operator) string {
	f.t.Helper()
	var id string
	err := wait.PollUntilContextTimeout(f.ctx, poll, 30*time.Second, true, func(context.Context) (bool, error) {
		file, err := os.Open(op.LogPath)
		if err != nil {
			return false, err
		}
		defer file.Close()
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct{ Message, Identity string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "waiting to lead" && line.Identity != "" {
				id = line.Identity
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		f.t.Fatalf("no leader-election identity in %s: %v", op.LogPath, err)
	}
	return id
}

func (f *fixture) operatorLease() *coordinationv1.Lease {
	f.t.Helper()
	l, err := suite.kube.CoordinationV1().Leases(f.ns).Get(f.ctx, operatorLeaseName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("get lease %s: %v", operatorLeaseName, err)
	}
	return l
}

// waitLease polls the Lease fast (a takeover is timed by it) until ok holds.
func (f *fixture) waitOperatorLease(what string, ok func(*coordinationv1.Lease) bool) *coordinationv1.Lease {
	f.t.Helper()
	var last *coordinationv1.Lease
	err := wait.PollUntilContextTimeout(f.ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := suite.kube.CoordinationV1().Leases(f.ns).Get(ctx, operatorLeaseName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = l
		return ok(l), nil
	})
	if err != nil {
		f.t.Fatalf("lease %s: %s: not within a minute; last seen:\n%s", operatorLeaseName, what, toYAML(last))
	}
	return last
}

func leaseHolder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func leaseTransitions(l *coordinationv1.Lease) int32 {
	if l.Spec.LeaseTransitions == nil {
		return 0
	}
	return *l.Spec.LeaseTransitions
}
