package e2e

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestNoWriteAfterLeaseLost: the leader's sync is held mid-flight (its StatefulSet apply stalls
// in the transport for stallFor, as on a slow network), another identity takes the Lease, and from
// the API server's side nothing the operator sends arrives after that: no StatefulSet, and no
// object in the fleet's namespace (fleet, status, reservation, Services, policies, PDB, Events,
// the Lease) changed by the operator past the takeover's resourceVersion. The operator exits on
// the loss; a new leader then finishes the fleet.
func TestNoWriteAfterLeaseLost(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const stallFor = 20 * time.Second
	leaderFlags := []string{"--leader-elect=true", "--leader-election-namespace", f.ns,
		"--leader-election-lease-duration=6s", "--leader-election-renew-deadline=4s", "--leader-election-retry-period=1s"}
	op := f.startOperator(append(leaderFlags, "--api-stall-writes=statefulsets:"+stallFor.String())...)

	fl := f.create(f.newFleet("held", v1alpha1.ProfilePersistentFleet, 3))
	if err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(context.Context) (bool, error) {
		n, _ := op.counter(t, "celld_operator_api_faults_injected_total")
		return n >= 1, nil
	}); err != nil {
		t.Fatalf("the StatefulSet apply never began: %v\n%s", err, tail(op.LogPath, 30))
	}
	stalledAt := time.Now()

	// Another identity takes the Lease, as a standby does once it expired.
	var takenRV string
	leases := suite.kube.CoordinationV1().Leases(f.ns)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(f.ctx, "celld-operator", metav1.GetOptions{})
		if err != nil {
			return err
		}
		t.Logf("lease held by %s; taken over", valueOr(l.Spec.HolderIdentity, ""))
		l.Spec.HolderIdentity = ptr("intruder")
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		l.Spec.AcquireTime = l.Spec.RenewTime
		l.Spec.LeaseDurationSeconds = ptr(int32(3600))
		u, err := leases.Update(f.ctx, l, metav1.UpdateOptions{})
		if err == nil {
			takenRV = u.ResourceVersion
		}
		return err
	}); err != nil {
		t.Fatalf("take the lease: %v", err)
	}
	taken := time.Now()
	select {
	case <-op.Exited:
		took := time.Since(taken)
		t.Logf("the operator exited %s after the takeover: %s", took.Round(10*time.Millisecond), op.Cmd.ProcessState)
		if op.Cmd.ProcessState.Success() {
			t.Errorf("the operator exited 0 on a lost lease; want a failure, so it restarts with fresh caches")
		}
		if took > 10*time.Second {
			t.Errorf("the operator exited %s after it lost the lease; want within the renew deadline", took)
		}
	case <-time.After(stallFor + 10*time.Second):
		op.kill()
		t.Errorf("the operator still ran %s after it lost the lease\n%s", stallFor+10*time.Second, tail(op.LogPath, 30))
	}
	// Past the stall: what the held sync would have sent by now, it sent.
	time.Sleep(time.Until(stalledAt.Add(stallFor + 3*time.Second)))

	if s, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("StatefulSet %s exists (%v) although its apply was held until after the lease was lost: managedFields %s",
			fl.Name, err, toYAML(s.ManagedFields))
	}
	after := writtenAfter(t, f, takenRV)
	if len(after) > 0 {
		t.Errorf("objects changed after the takeover (resourceVersion %s):\n%s", takenRV, strings.Join(after, "\n"))
	}
	log, err := os.ReadFile(op.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "leadership lost") {
		t.Errorf("the operator's log does not tell the loss:\n%s", tail(op.LogPath, 20))
	}
	t.Logf("%s after the takeover: no StatefulSet, nothing in %s changed past resourceVersion %s",
		time.Since(taken).Round(time.Second), f.ns, takenRV)

	// The intruder goes away; a new leader finishes the fleet.
	if err := leases.Delete(f.ctx, "celld-operator", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.startOperator(leaderFlags...)
	f.waitConverged(fl.Name)
}

// writtenAfter lists every object of the fleet's namespace the operator writes (and the Lease)
// whose resourceVersion is past rv, with who manages it, Events the operator reported included.
func writtenAfter(t *testing.T, f *fixture, rv string) []string {
	t.Helper()
	since, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	var out []string
	check := func(kind string, m metav1.Object) {
		v, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
		if err != nil || v <= since {
			return
		}
		var managers []string
		for _, e := range m.GetManagedFields() {
			managers = append(managers, e.Manager+"/"+string(e.Operation)+"@"+e.Time.UTC().Format(time.RFC3339))
		}
		out = append(out, kind+"/"+m.GetName()+" resourceVersion "+m.GetResourceVersion()+" managers "+strings.Join(managers, ","))
	}
	ctx, ns := f.ctx, f.ns
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	fleets, err := f.fleets().List(ctx, metav1.ListOptions{})
	must(err)
	for i := range fleets.Items {
		check("CelldFleet", &fleets.Items[i])
	}
	res, err := suite.celld.CelldV1alpha1().CelldReservations(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range res.Items {
		check("CelldReservation", &res.Items[i])
	}
	svcs, err := suite.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range svcs.Items {
		check("Service", &svcs.Items[i])
	}
	pols, err := suite.kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range pols.Items {
		check("NetworkPolicy", &pols.Items[i])
	}
	pdbs, err := suite.kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range pdbs.Items {
		check("PodDisruptionBudget", &pdbs.Items[i])
	}
	sets, err := suite.kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range sets.Items {
		check("StatefulSet", &sets.Items[i])
	}
	claims, err := suite.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range claims.Items {
		check("PersistentVolumeClaim", &claims.Items[i])
	}
	leases, err := suite.kube.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range leases.Items {
		check("Lease", &leases.Items[i])
	}
	evs, err := suite.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range evs.Items {
		if e := &evs.Items[i]; e.Source.Component == "celld-operator" || e.ReportingController == "celld-operator" {
			check("Event", e)
		}
	}
	return out
}
