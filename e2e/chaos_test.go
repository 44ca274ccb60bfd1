package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/contract"
	"github.com/celld/celld-operator/e2e/testenv"
)

// quickKills is how many kills the quick mode (the default, run by make test) makes at least.
const quickKills = 10

// TestCrashChaos: fleets of both profiles are created, grown 3 -> 9, healed off a node taken
// away, shrunk 9 -> 3, deleted and recreated, while the operator is killed with SIGKILL at random
// moments (seeded: CHAOS_SEED reproduces a run's decisions) and restarted, promptly or after a
// short pause. Every fleet ends Steady at its target, and the contract holds on everything the
// API server recorded meanwhile.
//
// Quick mode cycles through the operations twice (the Bucket fleet runs as a Deployment, then as
// an ordered StatefulSet), more if it has not made quickKills kills yet; CHAOS_KILLS=N (make
// chaos) keeps cycling until N kills.
//
// The operator runs without leader election: one process at a time, each killed and reaped before
// the next starts, so no two ever act at once, and a successor need not wait out a lease that a
// SIGKILL never released. That keeps a restart to the time the caches take to sync, and the kills
// frequent. Leader failover is tested on its own.
func TestCrashChaos(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
	}
	want := quickKills
	if s := os.Getenv("CHAOS_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("CHAOS_KILLS=%q: want a positive number", s)
		}
		want = n
	}
	t.Logf("chaos: seed %d (CHAOS_SEED=%d replays its decisions), at least %d kills", seed, seed, want)
	fmt.Printf("chaos: seed %d, at least %d kills\n", seed, want)
	start := time.Now()

	f := newFixture(t)
	judge := f.watchContract()
	m := f.unleash(rand.New(rand.NewPCG(seed, 1)))
	defer m.stop(t)
	r := &chaosRun{f: f, m: m, rng: rand.New(rand.NewPCG(seed, 2)), start: start}

	r.create()
	// A heal's replacement reuses its member's name at once: see nodeAgentPolicy.
	f.nodeAgentDeletesTerminatingPodsOnly(r.fleets[0])
	for {
		r.resize(9, "grow")
		// At 9 members the fleets cover most nodes: the likeliest size to find one that runs no
		// other test's Pods on a shared cluster.
		r.heal()
		r.resize(3, "shrink")
		r.deleteAll()
		r.cycle++
		r.create()
		if r.cycle >= 2 && m.killCount() >= want {
			break
		}
	}
	k := m.stop(t)
	for _, fl := range r.fleets {
		f.waitConverged(fl.Name)
	}
	checks := judge.Verify(t)
	line := fmt.Sprintf("chaos: seed %d, %d kills (%s; %d before the operator was ready), %d operations (%d heals) in %d cycles, %d contract checks, in %s",
		seed, k.total, k.during(), k.early, r.ops, r.heals, r.cycle, checks, time.Since(start).Round(time.Second))
	t.Log(line)
	fmt.Println(line)
}

// --- the operations ----------------------------------------------------------------------------

// chaosRun drives the fleets through their lifecycle, one operation on every fleet at a time.
type chaosRun struct {
	f      *fixture
	m      *chaosMonkey
	rng    *rand.Rand
	start  time.Time
	cycle  int
	ops    int
	heals  int
	fleets []*v1alpha1.CelldFleet
}

func (r *chaosRun) logf(format string, args ...any) {
	r.f.t.Helper()
	r.f.t.Logf("+%s cycle %d: %s", time.Since(r.start).Round(100*time.Millisecond), r.cycle, fmt.Sprintf(format, args...))
}

// create creates a PersistentFleet and a Bucket fleet at 3 members. The Bucket fleet's workload
// alternates between a Deployment and an ordered StatefulSet from one cycle to the next. A
// deleted fleet's reservation stays, so every incarnation gets a bucket of its own.
func (r *chaosRun) create() {
	f := r.f
	f.t.Helper()
	persistent := f.newFleet("persistent", v1alpha1.ProfilePersistentFleet, 3)
	bucket := f.newFleet("bucket", v1alpha1.ProfileBucket, 3)
	if r.cycle%2 == 1 {
		bucket.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	}
	r.fleets = r.fleets[:0]
	began := r.m.begin("create")
	defer r.m.end()
	for _, fl := range []*v1alpha1.CelldFleet{persistent, bucket} {
		fl.Spec.Capacity.ScaleInStabilization = duration(0)
		fl.Spec.Healing.UnreachableGracePeriod = duration(10 * time.Second) // the least admission allows
		// The operator alone heals, however long the kills keep it down: the taint manager's
		// eviction (after the unreachable toleration, or at once on the out-of-service taint of
		// the fencing) deletes a Pod by name, so when it fires just after the operator replaced that
		// member it deletes the replacement the StatefulSet controller made, which the contract
		// judge rightly takes for a member deleted on a healthy node.
		fl.Spec.Placement.Tolerations = append(fl.Spec.Placement.Tolerations,
			corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			corev1.Toleration{Key: corev1.TaintNodeOutOfService, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
		fl.Spec.Bucket.Name = fmt.Sprintf("%s-%d", f.bucket(fl.Name), r.cycle)
		r.fleets = append(r.fleets, f.create(fl))
		r.ops++
	}
	r.waitAll()
	r.logf("created %s and %s (%s) at 3: converged in %s", persistent.Name, bucket.Name, workloadKind(bucket), time.Since(began).Round(100*time.Millisecond))
}

func workloadKind(fl *v1alpha1.CelldFleet) string {
	if fl.Spec.Profile == v1alpha1.ProfilePersistentFleet || fl.Spec.Workload == v1alpha1.WorkloadOrderedStatefulSet {
		return "StatefulSet"
	}
	return "Deployment"
}

func (r *chaosRun) waitAll() {
	r.f.t.Helper()
	for i, fl := range r.fleets {
		r.fleets[i] = r.f.waitConverged(fl.Name)
	}
}

// resize asks every fleet for n members at once and waits until all are converged.
func (r *chaosRun) resize(n int32, what string) {
	r.f.t.Helper()
	began := r.m.begin(what)
	defer r.m.end()
	for _, fl := range r.fleets {
		r.f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = n })
		r.ops++
	}
	r.waitAll()
	r.logf("%s to %d: converged in %s", what, n, time.Since(began).Round(100*time.Millisecond))
}

// deleteAll deletes every fleet at once and waits until all are gone.
func (r *chaosRun) deleteAll() {
	f := r.f
	f.t.Helper()
	began := r.m.begin("delete")
	defer r.m.end()
	for _, fl := range r.fleets {
		if err := f.fleets().Delete(f.ctx, fl.Name, metav1.DeleteOptions{}); err != nil {
			f.t.Fatalf("delete fleet %s: %v", fl.Name, err)
		}
		r.ops++
	}
	for _, fl := range r.fleets {
		f.deleteFleet(fl.Name, true)
	}
	r.logf("deleted every fleet: gone in %s", time.Since(began).Round(100*time.Millisecond))
}

// heal takes away the node of one member or more (of different fleets, preferably) and waits
// until every fleet replaced its member, then brings the node back. The node is one that runs no
// other namespace's Pod, cordoned before it is checked so none lands there meanwhile.
func (r *chaosRun) heal() {
	f := r.f
	f.t.Helper()
	node, victims := r.takeNode()
	if node == "" {
		r.logf("heal skipped: every node of a member runs other namespaces' Pods")
		return
	}
	restore := sync.OnceFunc(func() {
		untaintNode(f.t, node, corev1.TaintNodeOutOfService)
		nodeScript(f.t, "ready", node)
		waitNode(f.t, node, 2*time.Minute, "Ready and untainted", contract.NodeHealthy)
		cordon(f.t, node, false)
	})
	f.t.Cleanup(restore)
	began := r.m.begin("heal")
	defer r.m.end()
	takeNodeAway(f.t, node)
	var names []string
	for _, v := range victims {
		names = append(names, v.pod.Name)
	}
	r.logf("node %s made unreachable, with members %s", node, strings.Join(names, ", "))
	// Its machine is then powered off and the node fenced: nothing is forced away before that.
	fenceNode(f.t, node)
	r.ops++
	r.heals++
	for _, v := range victims {
		f.waitReplaced(v.fleet, v.pod)
	}
	restore()
	r.logf("heal of %s: replaced and node back in %s", strings.Join(names, ", "), time.Since(began).Round(100*time.Millisecond))
}

type victim struct {
	fleet *v1alpha1.CelldFleet
	pod   corev1.Pod
}

// takeNode picks, at random among the healthy nodes that run members and no other namespace's
// Pod, one that runs members of as many fleets as possible, and cordons it.
func (r *chaosRun) takeNode() (string, []victim) {
	f := r.f
	f.t.Helper()
	ours := map[string][]victim{}
	for _, fl := range r.fleets {
		for _, p := range f.members(fl) {
			ours[p.Spec.NodeName] = append(ours[p.Spec.NodeName], victim{fleet: fl, pod: p})
		}
	}
	nodes, err := suite.kube.CoreV1().Nodes().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var candidates []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if len(ours[n.Name]) > 0 && contract.NodeHealthy(n) && !n.Spec.Unschedulable && len(r.strangers(n.Name)) == 0 {
			candidates = append(candidates, n.Name)
		}
	}
	sort.Strings(candidates)
	r.rng.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
	sort.SliceStable(candidates, func(i, j int) bool { return len(ours[candidates[i]]) > len(ours[candidates[j]]) })
	for _, node := range candidates {
		cordon(f.t, node, true)
		if s := r.strangers(node); len(s) > 0 {
			r.logf("node %s now runs %v: left alone", node, s)
			cordon(f.t, node, false)
			continue
		}
		return node, ours[node]
	}
	return "", nil
}

// strangers lists the Pods of other namespaces on a node.
func (r *chaosRun) strangers(node string) []string {
	f := r.f
	f.t.Helper()
	l, err := suite.kube.CoreV1().Pods(metav1.NamespaceAll).List(f.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, p := range l.Items {
		if p.Namespace != f.ns {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	return out
}

func cordon(t *testing.T, node string, on bool) {
	t.Helper()
	if err := setUnschedulable(node, on); err != nil {
		t.Fatal(err)
	}
}

// setUnschedulable cordons a node or uncordons it; a node that is gone is no error. It fails no
// test, so a goroutine beside one may call it.
func setUnschedulable(node string, on bool) error {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := suite.kube.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cordon node %s (%t): %w", node, on, err)
	}
	return nil
}

// --- the kills ---------------------------------------------------------------------------------

// chaosMonkey kills the fixture's operator at random moments and starts another each time. It
// runs on a goroutine of its own, so it never fails the test itself: stop reports what went wrong.
type chaosMonkey struct {
	f    *fixture
	rng  *rand.Rand
	quit chan struct{}
	done chan struct{}
	// poke says an operation just began.
	poke chan struct{}

	mu      sync.Mutex
	current *operator
	// since is when the current operator was started.
	since   time.Time
	started []*operator
	kills   kills
	busy    string // the operation in flight, empty when none
	err     error
	stopped bool
}

type kills struct {
	total int
	// early: before the operator was ready.
	early int
	// by counts the kills by the operation in flight then, "idle" when none was.
	by map[string]int
}

func (k kills) during() string {
	var parts []string
	for _, op := range []string{"create", "grow", "shrink", "heal", "delete", "idle"} {
		parts = append(parts, fmt.Sprintf("%s %d", op, k.by[op]))
	}
	return strings.Join(parts, ", ")
}

// begin marks an operation in flight, from its first write until it is observed done.
func (m *chaosMonkey) begin(what string) time.Time {
	m.mu.Lock()
	m.busy = what
	m.mu.Unlock()
	select {
	case m.poke <- struct{}{}:
	default:
	}
	return time.Now()
}

func (m *chaosMonkey) end() {
	m.mu.Lock()
	m.busy = ""
	m.mu.Unlock()
}

// unleash starts an operator and the goroutine that kills it.
func (f *fixture) unleash(rng *rand.Rand) *chaosMonkey {
	f.t.Helper()
	m := &chaosMonkey{f: f, rng: rng, quit: make(chan struct{}), done: make(chan struct{}), poke: make(chan struct{}, 1),
		kills: kills{by: map[string]int{}}, current: f.startOperator(), since: time.Now()}
	go m.run()
	return m
}

func (m *chaosMonkey) killCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.kills.total
}

func (m *chaosMonkey) run() {
	defer close(m.done)
outer:
	for {
		m.mu.Lock()
		op, began := m.current, m.since
		m.mu.Unlock()
		// One kill in six comes within 300ms of the start, often before the caches synced; the
		// others once the operator is ready, 0.5 to 6 seconds in, or 0.2 to 1.5 seconds in while
		// a short operation is in flight. An operation's first write brings the kill forward, two
		// times in three, to within 1.2 seconds. A create, grow, scale-in or delete takes a few
		// seconds only, a heal half a minute: without this, kills would land mostly in heals,
		// and a kill in the midst of a scale-in is the one that matters most.
		var wait time.Duration
		if m.rng.IntN(6) == 0 {
			wait = time.Duration(m.rng.Int64N(int64(300 * time.Millisecond)))
		} else {
			if err := m.awaitReady(op); err != nil {
				if m.respawnOnPortClash(op) {
					continue
				}
				m.fail(err)
				return
			}
			m.mu.Lock()
			short := m.busy != "" && m.busy != "heal"
			m.mu.Unlock()
			if short {
				wait = time.Since(began) + 200*time.Millisecond + time.Duration(m.rng.Int64N(int64(1300*time.Millisecond)))
			} else {
				wait = time.Since(began) + 500*time.Millisecond + time.Duration(m.rng.Int64N(int64(5500*time.Millisecond)))
			}
		}
		timer := time.NewTimer(wait - time.Since(began))
	waiting:
		for {
			select {
			case <-m.quit:
				timer.Stop()
				return
			case <-op.Exited:
				timer.Stop()
				if m.respawnOnPortClash(op) {
					continue outer
				}
				m.fail(fmt.Errorf("operator pid %d exited on its own: %s\n%s", op.Cmd.Process.Pid, op.Cmd.ProcessState, tail(op.LogPath, 30)))
				return
			case <-m.poke:
				if m.rng.IntN(3) != 0 {
					soon := time.Duration(m.rng.Int64N(int64(1200 * time.Millisecond)))
					if time.Since(began)+soon < wait {
						wait = time.Since(began) + soon
						timer.Reset(soon)
					}
				}
			case <-timer.C:
				break waiting
			}
		}
		ready := m.isReady(op)
		op.kill()
		m.mu.Lock()
		m.kills.total++
		if !ready {
			m.kills.early++
		}
		busy := m.busy
		if busy == "" {
			busy = "idle"
		}
		m.kills.by[busy]++
		m.mu.Unlock()
		m.f.t.Logf("chaos: operator pid %d killed %s after its start (ready: %t, during: %s)",
			op.Cmd.Process.Pid, time.Since(began).Round(10*time.Millisecond), ready, busy)
		// Restarted at once mostly; a third of the time after a pause of up to 3 seconds.
		if m.rng.IntN(3) == 0 {
			time.Sleep(200*time.Millisecond + time.Duration(m.rng.Int64N(int64(2800*time.Millisecond))))
		}
		next, err := m.spawn()
		if err != nil {
			m.fail(err)
			return
		}
		m.mu.Lock()
		m.current, m.since = next, time.Now()
		m.mu.Unlock()
	}
}

// respawnOnPortClash starts another operator in place of one that exited because a port found
// free was taken before it bound it.
func (m *chaosMonkey) respawnOnPortClash(op *operator) bool {
	select {
	case <-op.Exited:
	default:
		return false
	}
	if !strings.Contains(tail(op.LogPath, 5), "address already in use") {
		return false
	}
	m.f.t.Logf("chaos: operator pid %d found its port taken: started again", op.Cmd.Process.Pid)
	next, err := m.spawn()
	if err != nil {
		m.fail(err)
		return false
	}
	m.mu.Lock()
	m.current, m.since = next, time.Now()
	m.mu.Unlock()
	return true
}

func (m *chaosMonkey) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = err
	}
}

// stop ends the kills and returns their counts, with an operator left running and ready for what
// follows (the fleets' deletion at cleanup among it). The last operators it started join the
// fixture's, to be stopped, and shown when the test fails; every log stays in the log directory.
// It runs deferred, on Goexit too, so it reports with Errorf only.
func (m *chaosMonkey) stop(t *testing.T) kills {
	t.Helper()
	m.mu.Lock()
	if m.stopped {
		defer m.mu.Unlock()
		return m.kills
	}
	m.stopped = true
	m.mu.Unlock()
	close(m.quit)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	m.f.ops = append(m.f.ops, m.started[max(0, len(m.started)-3):]...)
	if m.err != nil {
		t.Errorf("chaos: %v", m.err)
	}
	if err := m.awaitReady(m.current); err != nil {
		t.Errorf("chaos: the last operator: %v", err)
		if op, err := m.spawn(); err != nil {
			t.Errorf("chaos: no operator left running: %v", err)
		} else {
			m.f.ops = append(m.f.ops, op)
		}
	}
	return m.kills
}

// spawn starts an operator as startOperator does, without waiting for it to be ready and without
// failing the test: it runs on the chaos goroutine.
func (m *chaosMonkey) spawn() (*operator, error) {
	op, err := m.launch()
	if err != nil {
		return nil, err
	}
	m.started = append(m.started, op)
	m.f.t.Logf("chaos: operator pid %d started (log %s)", op.Cmd.Process.Pid, op.LogPath)
	return op, nil
}

func (m *chaosMonkey) launch() (*operator, error) {
	f := m.f
	op, err := testenv.Launch(testenv.Options{
		Binary: suite.operator, DieWithParent: true,
		LogPath: filepath.Join(suite.logDir, fmt.Sprintf("%s-%d.log", strings.ReplaceAll(f.t.Name(), "/", "_"), len(f.ops)+len(m.started))),
		Args:    []string{"--kubeconfig", suite.kubeconfig, "--namespace", f.ns, "--workers", "4"},
	})
	if err != nil {
		return nil, err
	}
	return &operator{op}, nil
}

func (m *chaosMonkey) isReady(op *operator) bool { return op.Ready() }

// awaitReady waits up to a minute for the operator's readiness, as startOperator does.
func (m *chaosMonkey) awaitReady(op *operator) error {
	deadline := time.Now().Add(time.Minute)
	for !m.isReady(op) {
		select {
		case <-op.Exited:
			return fmt.Errorf("operator pid %d exited: %s\n%s", op.Cmd.Process.Pid, op.Cmd.ProcessState, tail(op.LogPath, 30))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("operator pid %d not ready within a minute\n%s", op.Cmd.Process.Pid, tail(op.LogPath, 30))
		}
		time.Sleep(poll)
	}
	return nil
}
