package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/contract"
	"github.com/celld/celld-operator/kinds"
)

const (
	// evictionRetry is how long kubectl drain waits before it asks again for an eviction the
	// disruption budget refused (429).
	evictionRetry = 5 * time.Second
	// drainBound is how long one drain may take here, cordon to the last evicted member gone. A
	// member's replacement on kwok is Ready within a second, but Kubernetes' disruption
	// controller remembers an evicted Pod by name for up to 2 minutes (DeletionTimeout) unless
	// it sees that Pod gone: a StatefulSet member recreated under its name faster than that
	// counts as disrupted, and the budget refuses the next eviction of its fleet until then.
	drainBound = 150 * time.Second
)

// TestRollingNodeMaintenance: every node is drained in turn, as kubectl drain and cluster
// upgrades do (cordon, evict each member on it through the Eviction API, retrying while the
// budget refuses, wait until they are gone, uncordon), under a PersistentFleet of 3, two Bucket
// fleets of 2 (a Deployment and an ordered StatefulSet) and one of 1, with a scale-in of the
// PersistentFleet asked for during the first drain; then the nodes of both its remaining
// members at once, as a node pool upgrade that takes two nodes at a time does, with nowhere else
// to run for a while: the budget lets one member of each fleet go and refuses the other. Judged
// from the API server's record: no eviction takes a second member of a fleet away, the operator deletes
// no member (the scale-in's member goes by its StatefulSet's scale-down), every drain completes
// within drainBound, and the fleets end Steady at their targets.
//
// Not parallel: cordoned nodes would hold other tests' Pods back.
func TestRollingNodeMaintenance(t *testing.T) {
	f := newFixture(t)
	judge := f.watchContract()
	judge.AttributeBy(suite.auditLog)
	f.startOperator()

	pf := f.newFleet("persistent", v1alpha1.ProfilePersistentFleet, 3)
	pf.Spec.Capacity.ScaleInStabilization = duration(0)
	bucket := f.newFleet("bucket", v1alpha1.ProfileBucket, 2)
	ordered := f.newFleet("ordered", v1alpha1.ProfileBucket, 2)
	ordered.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	// The budget lets a one-member fleet's member go: that fleet is down until it is back.
	single := f.newFleet("single", v1alpha1.ProfileBucket, 1)
	var fleets []*v1alpha1.CelldFleet
	for _, fl := range []*v1alpha1.CelldFleet{pf, bucket, ordered, single} {
		fleets = append(fleets, f.create(fl))
	}
	for _, fl := range fleets {
		f.waitConverged(fl.Name)
	}
	// An evicted StatefulSet member's replacement takes its name at once: see nodeAgentPolicy.
	f.nodeAgentDeletesTerminatingPodsOnly(fleets[0])

	nodes := drainOrder(t, f.members(fleets[0])[0].Spec.NodeName)
	start := time.Now()
	var total drained
	for i, node := range nodes {
		var during func()
		if i == 0 {
			// A scale-in asked for while a member is away waits for it, as the contract says.
			during = func() {
				f.update(pf.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 2 })
				// What the person running the drain sees meanwhile (docs/node-maintenance.md).
				time.Sleep(time.Second)
				for _, fl := range fleets {
					cur, err := f.fleets().Get(f.ctx, fl.Name, metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("during the drain, fleet %s: state %s, Ready %s, Progressing %s", cur.Name, cur.Status.State,
						describe(condition(cur, v1alpha1.ConditionReady)), describe(condition(cur, v1alpha1.ConditionProgressing)))
				}
			}
		}
		d := f.drain(during, node)
		t.Logf("+%s drained %s in %s: evicted %v, refused by the budget %d times", time.Since(start).Round(100*time.Millisecond),
			node, d.took.Round(100*time.Millisecond), d.evicted, d.refused)
		if i == 0 && len(d.evicted) == 0 {
			t.Fatalf("the first node drained, %s, ran no member: the scale-in was asked for with none away", node)
		}
		if d.took > drainBound {
			t.Errorf("drain of %s took %s; want at most %s", node, d.took.Round(100*time.Millisecond), drainBound)
		}
		total.add(d)
	}
	t.Logf("%d nodes drained one at a time in %s: %d members evicted, %d evictions refused by the budget, longest drain %s",
		len(nodes), time.Since(start).Round(100*time.Millisecond), len(total.evicted), total.refused, total.took.Round(100*time.Millisecond))

	for _, fl := range fleets {
		got := f.waitConverged(fl.Name)
		t.Logf("fleet %s: %s at %d members", got.Name, got.Status.State, got.Status.Members.Ready)
	}
	if got := f.waitConverged(pf.Name); got.Status.Members.Current != 2 {
		t.Errorf("fleet %s: %d members, want the 2 asked for during the first drain", pf.Name, got.Status.Members.Current)
	}

	// The nodes of both PersistentFleet members drained at once, as a node pool upgrade that
	// takes two nodes at a time does: the budget lets one member go and holds the other until the
	// first is back and Ready. Every other node is cordoned for holdFor, so that the first
	// member's replacement has nowhere to run and the hold shows: a kwok replacement is Ready in
	// well under a second, less than the API server takes to retry an eviction whose budget
	// update lost a race to another (EvictionsRetry, 500 ms), and the second eviction would then
	// land without any refusal, the same with a budget that allowed both.
	var both []string
	for _, p := range f.members(fleets[0]) {
		both = append(both, p.Spec.NodeName)
	}
	// A member evicted by the last drain may still count as disrupted (the disruption
	// controller remembers an evicted Pod by name, see drainBound): no member could go then.
	f.waitBudgetsAllow(fleets)
	hold := f.holdElsewhere(both)
	d := f.drain(nil, both...)
	t.Logf("drained %v together in %s: evicted %v, refused by the budget %d times", both, d.took.Round(100*time.Millisecond), d.evicted, d.refused)
	gone := <-hold
	for _, err := range gone.errs {
		t.Error(err)
	}
	t.Logf("after %s with nowhere else to run, members gone by fleet: %v, of those on the drained nodes %v", holdFor, gone.byFleet, gone.onNodes)
	for fleet, n := range gone.onNodes {
		switch {
		case gone.byFleet[fleet] == 0:
			t.Errorf("fleet %s: no member of the %d on the drained nodes was evicted; the budget lets one go", fleet, n)
		case n > 1 && gone.byFleet[fleet] > 1:
			t.Errorf("fleet %s: %d members evicted at once while none could come back; the budget lets one go at a time", fleet, gone.byFleet[fleet])
		}
	}
	if d.refused == 0 {
		t.Errorf("the budget refused no eviction while a member of each fleet could not come back")
	}
	if d.took > drainBound {
		t.Errorf("drain of %v took %s; want at most %s", both, d.took.Round(100*time.Millisecond), drainBound)
	}
	total.add(d)
	for _, fl := range fleets {
		f.waitConverged(fl.Name)
	}

	v, versions := judge.Judgement(t)
	for _, msg := range v.Violations {
		t.Errorf("contract: %s", msg)
	}
	t.Logf("contract: %d checks over %d recorded versions, %d violations; %s", v.Checks, versions, len(v.Violations), v.Summary())
	if v.Explained["Pod: evicted"] != len(total.evicted) {
		t.Errorf("the judge put %d deletions down to an eviction; the drains evicted %d members", v.Explained["Pod: evicted"], len(total.evicted))
	}
	if n := v.ByClause["drain"]; n != len(total.evicted) {
		t.Errorf("the judge held %d evictions to the drain clause; the drains evicted %d members of live fleets", n, len(total.evicted))
	}
	for why, n := range v.Explained {
		if why != "Pod: evicted" && why != "Pod: scale-down" {
			t.Errorf("%d member deletions explained by %q: a drain and a scale-in explain them all", n, why)
		}
	}
	requests, err := contract.ReadAudit(suite.auditLog, f.ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range requests {
		if !r.Eviction && r.ByOperator() {
			t.Errorf("the operator deleted member %s during maintenance: %s", r.Name, r)
		}
	}
}

func describe(c metav1.Condition) string {
	return fmt.Sprintf("%s (%s: %s)", c.Status, c.Reason, c.Message)
}

// holdFor is how long holdElsewhere keeps the other nodes cordoned: longer than the API server
// retries an eviction whose budget update lost a race (EvictionsRetry), shorter than drainBound.
const holdFor = 12 * time.Second

// held is what holdElsewhere saw once holdFor was over: by fleet, how many of its members that ran
// on the drained nodes were gone or terminating, and how many ran there.
type held struct {
	byFleet, onNodes map[string]int
	errs             []error
}

// holdElsewhere cordons every schedulable node but nodes, for holdFor, so that a member evicted
// from nodes cannot come back meanwhile; it then counts what was evicted, uncordons them, and
// sends what it saw. It runs beside a drain, on a goroutine, so it reports errors rather than
// failing the test.
func (f *fixture) holdElsewhere(nodes []string) <-chan held {
	f.t.Helper()
	l, err := suite.kube.CoreV1().Nodes().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	drained := map[string]bool{}
	for _, n := range nodes {
		drained[n] = true
	}
	var others []string
	for i := range l.Items {
		if n := &l.Items[i]; !drained[n.Name] && !n.Spec.Unschedulable {
			others = append(others, n.Name)
			cordon(f.t, n.Name, true)
		}
	}
	pods, err := suite.kube.CoreV1().Pods(f.ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	h := held{byFleet: map[string]int{}, onNodes: map[string]int{}}
	watched := map[types.UID]string{}
	for _, p := range pods.Items {
		if fleet := p.Labels[kinds.LabelInstance]; fleet != "" && drained[p.Spec.NodeName] && p.DeletionTimestamp == nil {
			watched[p.UID] = fleet
			h.onNodes[fleet]++
		}
	}
	out := make(chan held, 1)
	go func() {
		defer close(out)
		time.Sleep(holdFor)
		now, err := suite.kube.CoreV1().Pods(f.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			h.errs = append(h.errs, fmt.Errorf("list Pods after the hold: %w", err))
		} else {
			alive := map[types.UID]bool{}
			for _, p := range now.Items {
				alive[p.UID] = p.DeletionTimestamp == nil
			}
			for uid, fleet := range watched {
				if !alive[uid] {
					h.byFleet[fleet]++
				}
			}
		}
		for _, n := range others {
			if err := setUnschedulable(n, false); err != nil {
				h.errs = append(h.errs, err)
			}
		}
		out <- h
	}()
	return out
}

// waitBudgetsAllow waits until the disruption budget of each fleet allows one eviction. Its
// disruptedPods may still name Pods that are gone: the controller drops them at its next sync
// of the budget, which nothing may cause for hours, and the Eviction API does not read them.
func (f *fixture) waitBudgetsAllow(fleets []*v1alpha1.CelldFleet) {
	f.t.Helper()
	for _, fl := range fleets {
		var last policyv1.PodDisruptionBudgetStatus
		err := wait.PollUntilContextTimeout(f.ctx, poll, drainBound, true, func(ctx context.Context) (bool, error) {
			b, err := suite.kube.PolicyV1().PodDisruptionBudgets(f.ns).Get(ctx, fl.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			last = b.Status
			return b.Status.ObservedGeneration == b.Generation && b.Status.DisruptionsAllowed >= 1, nil
		})
		if err != nil {
			f.t.Fatalf("the disruption budget of fleet %s allows no eviction within %s: %+v", fl.Name, drainBound, last)
		}
	}
}

// drained is what one drain did, or several.
type drained struct {
	took    time.Duration
	evicted []string
	refused int
}

func (d *drained) add(o drained) {
	d.took = max(d.took, o.took)
	d.evicted = append(d.evicted, o.evicted...)
	d.refused += o.refused
}

// drainOrder lists the healthy nodes, first the one given, then by name.
func drainOrder(t *testing.T, first string) []string {
	t.Helper()
	l, err := suite.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := []string{first}
	for i := range l.Items {
		n := &l.Items[i]
		if n.Name != first && contract.NodeHealthy(n) && !n.Spec.Unschedulable {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out[1:])
	return out
}

// drain drains nodes as kubectl drain does, of the fixture's Pods: cordons them, evicts each Pod
// on them at once, each retried every evictionRetry while the budget refuses, runs during (if
// any) once they are evicted, waits until they are gone, and uncordons the nodes. Several nodes
// are drained together, as a node pool upgrade that takes more than one node at a time does.
func (f *fixture) drain(during func(), nodes ...string) drained {
	f.t.Helper()
	start := time.Now()
	var pods []corev1.Pod
	for _, node := range nodes {
		cordon(f.t, node, true)
		defer cordon(f.t, node, false)
		l, err := suite.kube.CoreV1().Pods(f.ns).List(f.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			f.t.Fatalf("list Pods on %s: %v", node, err)
		}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil {
				pods = append(pods, p)
			}
		}
	}
	var (
		d    drained
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []string
	)
	for _, p := range pods {
		wg.Go(func() {
			evicted, refused, err := evict(f.ctx, p, start.Add(drainBound))
			mu.Lock()
			defer mu.Unlock()
			d.refused += refused
			if err != nil {
				errs = append(errs, err.Error())
			} else if evicted {
				d.evicted = append(d.evicted, p.Name)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		f.t.Fatalf("drain of %v: %s", nodes, strings.Join(errs, "; "))
	}
	if during != nil {
		during()
	}
	for _, p := range pods {
		err := wait.PollUntilContextTimeout(f.ctx, poll, drainBound, true, func(ctx context.Context) (bool, error) {
			cur, err := suite.kube.CoreV1().Pods(f.ns).Get(ctx, p.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err) || (err == nil && cur.UID != p.UID), nil
		})
		if err != nil {
			f.t.Fatalf("drain of %v: Pod %s evicted, not gone within %s", nodes, p.Name, drainBound)
		}
	}
	sort.Strings(d.evicted)
	d.took = time.Since(start)
	return d
}

// evict asks for one Pod's eviction until the budget allows it (evicted) or the Pod is gone
// anyway, or deadline passes; refused is how many times the budget said no.
func evict(ctx context.Context, p corev1.Pod, deadline time.Time) (evicted bool, refused int, err error) {
	for {
		err := suite.kube.CoreV1().Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
		switch {
		case err == nil:
			return true, refused, nil
		case apierrors.IsNotFound(err):
			return false, refused, nil
		case !apierrors.IsTooManyRequests(err):
			return false, refused, fmt.Errorf("evict %s: %w", p.Name, err)
		}
		refused++
		if time.Now().Add(evictionRetry).After(deadline) {
			return false, refused, fmt.Errorf("evict %s: refused %d times, the last: %w", p.Name, refused, err)
		}
		select {
		case <-ctx.Done():
			return false, refused, ctx.Err()
		case <-time.After(evictionRetry):
		}
	}
}
