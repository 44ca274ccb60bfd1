package e2e

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/contract"
	"github.com/celld/celld-operator/e2e/testenv"
)

// apiserverDown is how long kube-apiserver and etcd stay stopped.
const apiserverDown = 8 * time.Second

// restartedComponents are stopped in this order, then started again by cluster/up.sh. The
// kube-controller-manager goes down with the API server: left running, its node lifecycle
// controller counts the outage against the fake nodes' heartbeats and marks every node and Pod
// NotReady, and with no kubelet nothing marks the Pods Ready again. Restarted, it gives every
// node a fresh grace period, as it does at any start.
var restartedComponents = []string{"kube-controller-manager", "kube-apiserver", "etcd"}

// TestAPIServerRestart: kube-apiserver and etcd are stopped mid-lifecycle (a scale-in 5 -> 2 has
// taken its first step, a grow 2 -> 4 was just asked for), kept down, and started again. The
// operator keeps running, reconnects, resyncs and carries on: the scale-in goes on one member per
// step, the grow in one step, no disk and no Pod outside the scale-in is deleted, and once the
// fleets converged again the operator writes nothing.
//
// Not parallel: it restarts the suite's own control plane (cluster/stop.sh, cluster/up.sh, with
// the environment the suite was started with), so it runs alone, while the parallel tests wait.
func TestAPIServerRestart(t *testing.T) {
	f := newFixture(t)
	op := f.startOperator("--resync-period=10s")
	persistent := f.newFleet("persistent", v1alpha1.ProfilePersistentFleet, 5)
	ordered := f.newFleet("ordered", v1alpha1.ProfileBucket, 2)
	ordered.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	fleets := []*v1alpha1.CelldFleet{persistent, ordered}
	for i, fl := range fleets {
		fl.Spec.Capacity.ScaleInStabilization = duration(0)
		fleets[i] = f.create(fl)
	}
	for _, fl := range fleets {
		f.waitConverged(fl.Name)
	}
	sets, pods, claims := f.recordAcrossRestarts("statefulsets"), f.recordAcrossRestarts("pods"), f.recordAcrossRestarts("persistentvolumeclaims")

	f.update(persistent.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 2 })
	if err := wait.PollUntilContextTimeout(f.ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(ctx, persistent.Name, metav1.GetOptions{})
		return err == nil && *s.Spec.Replicas < 5, nil
	}); err != nil {
		t.Fatalf("the scale-in did not start: %v", err)
	}
	f.update(ordered.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 4 })
	_, before := op.counter(t, "celld_operator_api_requests_total")

	// The API server's graceful shutdown waits for its watches; a few seconds of it are enough.
	t.Setenv("STOP_TIMEOUT", "3")
	// Every client in this process fails while the API server is away: keep its log readable.
	klog.SetLogger(logr.Discard())
	stopped := time.Now()
	if _, err := suite.cp.Script("stop.sh", restartedComponents...); err != nil {
		klog.ClearLogger()
		t.Fatalf("cluster/stop.sh %s: %v", strings.Join(restartedComponents, " "), err)
	}
	s := lastStatefulSet(t, sets, persistent.Name)
	t.Logf("%s stopped in %s, with %s at %s (rolled out: %v)", strings.Join(restartedComponents, ", "),
		time.Since(stopped).Round(time.Millisecond), persistent.Name, contract.DescribeStatefulSet(s), contract.RolledOut(s))
	time.Sleep(apiserverDown)
	_, err := suite.cp.Script("up.sh")
	klog.ClearLogger()
	if err != nil {
		t.Fatalf("cluster/up.sh: %v", err)
	}
	up := time.Now()
	t.Logf("API server back: down for %s (stopping, %s stopped, then cluster/up.sh)", up.Sub(stopped).Round(time.Millisecond), apiserverDown)

	for i, fl := range fleets {
		fleets[i] = f.waitConverged(fl.Name)
	}
	t.Logf("every fleet converged %s after the API server was back", time.Since(up).Round(time.Millisecond))
	select {
	case <-op.Exited:
		t.Fatalf("the operator exited while the API server was away: %s\n%s", op.Cmd.ProcessState, tail(op.LogPath, 30))
	default:
	}
	if !op.ready() {
		t.Errorf("the operator is not ready after the API server came back")
	}
	_, after := op.counter(t, "celld_operator_api_requests_total")
	again := testenv.Delta(after, before)
	t.Logf("requests since the stop, by verb and resource:%s", formatSeries(again))
	if sumVerb(again, "list")+sumVerb(again, "watch") == 0 {
		t.Errorf("no list or watch since the API server came back: the operator did not reconnect")
	}

	checkOneStepShrink(t, statefulSetChanges(sets.Await(t, "rolled out at 2", rolledOutAt(persistent.Name, 2)), persistent.Name), 5, 2)
	if grow := statefulSetChanges(sets.Await(t, "rolled out at 4", rolledOutAt(ordered.Name, 4)), ordered.Name); len(grow) != 1 || grow[0].from != 2 || grow[0].to != 4 {
		t.Errorf("%s: grow 2 to 4: want one change 2->4 of spec.replicas, got %s", ordered.Name, formatChanges(grow))
	}
	for _, name := range []string{persistent.Name, ordered.Name} {
		checkNoChangeMissed(t, sets, name)
	}
	byFleet := deletedPodsByFleet(pods.Events(t), fleets)
	if got, want := strings.Join(byFleet[persistent.Name], ","), "persistent-2,persistent-3,persistent-4"; got != want {
		t.Errorf("%s: pods deleted: %s, want %s (the scale-in's, each once)", persistent.Name, got, want)
	}
	if n := len(byFleet[ordered.Name]); n != 0 {
		t.Errorf("%s: pods deleted: %v, want none", ordered.Name, byFleet[ordered.Name])
	}
	if dels := deletions(claims.Events(t)); len(dels) != 0 {
		t.Errorf("claims deleted: %v; scale-in keeps a PersistentFleet's disks", names(dels))
	}
	t.Logf("recorders relisted %d, %d and %d times across the restart", sets.Relists(), pods.Relists(), claims.Relists())

	// Converged again: no write at all, through resyncs every 10 s. Not before the restarted
	// kube-controller-manager has judged every node: it grants each a grace period from its own
	// start, and a fake node whose heartbeats resume after it is marked NotReady with its members,
	// a change in the world the operator rightly reports. At rest starts with every node Ready
	// past that point.
	settleNodes(t, up.Add(nodeMonitorGrace()+2*time.Second))
	f.quiet(op, 3*time.Second)
	w0, series := op.writes(t)
	mark := op.LogOffset()
	time.Sleep(30 * time.Second)
	if w1, now := op.writes(t); w1 != w0 {
		t.Errorf("%g writes in 30 s at rest after the restart:%s%s", w1-w0, formatSeries(testenv.Delta(now, series)), op.loggedSince(mark, 40))
	}
	t.Logf("no write in 30 s at rest after the restart")
}

// ready asks the operator's /readyz.
func (op *operator) ready() bool {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + op.Probe + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func sumVerb(series map[string]float64, verb string) float64 {
	n := 0.0
	for k, v := range series {
		if strings.Contains(k, `verb="`+verb+`"`) {
			n += v
		}
	}
	return n
}

// recordAcrossRestarts records one kind of the fixture's namespace across API server restarts
// (see contract.RecordAcrossRestarts).
func (f *fixture) recordAcrossRestarts(what string) *recorder {
	f.t.Helper()
	var s contract.Source
	switch what {
	case "statefulsets":
		c := suite.kube.AppsV1().StatefulSets(f.ns)
		s = contract.ListWatch(what, c.List, c.Watch)
	case "pods":
		c := suite.kube.CoreV1().Pods(f.ns)
		s = contract.ListWatch(what, c.List, c.Watch)
	case "persistentvolumeclaims":
		c := suite.kube.CoreV1().PersistentVolumeClaims(f.ns)
		s = contract.ListWatch(what, c.List, c.Watch)
	default:
		f.t.Fatalf("recordAcrossRestarts: unknown kind %s", what)
	}
	return contract.RecordAcrossRestarts(f.ctx, f.t, s, logf)
}

// lastStatefulSet is the latest version of a StatefulSet the recorder saw.
func lastStatefulSet(t *testing.T, r *recorder, name string) *appsv1.StatefulSet {
	evs := r.Events(t)
	for i := len(evs) - 1; i >= 0; i-- {
		if s, ok := evs[i].Obj.(*appsv1.StatefulSet); ok && s.Name == name {
			return s
		}
	}
	return nil
}

// checkNoChangeMissed fails the test if two consecutive versions of a StatefulSet seen are more
// than one spec change apart: a relist would then have hidden a step from the checks.
func checkNoChangeMissed(t *testing.T, r *recorder, name string) {
	t.Helper()
	var prev *appsv1.StatefulSet
	for _, e := range r.Events(t) {
		s, ok := e.Obj.(*appsv1.StatefulSet)
		if !ok || s.Name != name {
			continue
		}
		if prev != nil && s.Generation > prev.Generation+1 {
			t.Errorf("%s: generation %d, then %d: a spec change happened unseen (resource versions %s, %s)", name,
				prev.Generation, s.Generation, prev.ResourceVersion, s.ResourceVersion)
		}
		prev = s
	}
	if prev != nil {
		t.Logf("%s: every spec change seen, up to generation %s", name, strconv.FormatInt(prev.Generation, 10))
	}
}

// nodeMonitorGrace is kube-controller-manager's --node-monitor-grace-period as cluster/up.sh sets
// it.
func nodeMonitorGrace() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("NODE_MONITOR_GRACE_PERIOD")); err == nil {
		return d
	}
	return 20 * time.Second
}

// settleNodes waits until after, then until every node is healthy.
func settleNodes(t *testing.T, after time.Time) {
	t.Helper()
	time.Sleep(time.Until(after))
	err := wait.PollUntilContextTimeout(context.Background(), poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := suite.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range l.Items {
			if !contract.NodeHealthy(&l.Items[i]) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the nodes are not all healthy a minute after the control plane's restart settled")
	}
}
