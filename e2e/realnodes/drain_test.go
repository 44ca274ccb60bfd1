package realnodes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/celldstore/load"
	"github.com/celld/celld-operator/e2e/contract"
)

const (
	// evictionRetry is how long kubectl drain waits before it asks again for an eviction the
	// disruption budget refused (429).
	evictionRetry = 5 * time.Second
	// drainBound is how long one drain may take on the real nodes, cordon to the last evicted Pod
	// gone. A drain right after the previous node came back waits, its evictions refused, until
	// that node's PersistentFleet member is back on its disk and Ready: scheduled, started,
	// caught up, then seen Ready by its readiness probe (every 2 s by the chart's default), then counted by the
	// disruption controller; or until a Bucket member's replacement has rebuilt its working
	// copy from the bucket, which takes longer the more the bucket holds and the busier the
	// machine. Measured on two shared cores, five runs of six drains under a PersistentFleet
	// and a Bucket fleet: the longest drain of each run 24 s, 31 s, 37 s, 75 s and 97 s (the
	// last two waiting on a Bucket member catching up, late in the run). The bound leaves room
	// for Kubernetes' own wait, up to 2 minutes, on a StatefulSet member's name the disruption
	// controller did not see go (docs/node-maintenance.md); a drain that a stuck member blocks
	// never ends, which is what it must catch.
	drainBound = 3 * time.Minute
)

// auditLog is the real control plane's audit log (cluster/up.sh writes one for either mode):
// the judge tells a drain's evictions from the operator's deletes by it.
func auditLog() string { return filepath.Join(suite.run, "logs", "audit.log") }

// TestRollingNodeMaintenanceOnRealNodes: with the load client writing to a PersistentFleet of 3
// (node-local disks) and a Bucket fleet of 2, every real node is drained in turn and brought
// back, twice round, as kubectl drain and rolling node upgrades do: cordon, evict every Pod on it
// (the operator's too) through the Eviction API, retried every 5 s while a budget refuses, wait
// until the evicted Pods are gone, uncordon. A scale-in of the PersistentFleet (3->2) is asked for
// during the first drain. Judged on what the cluster recorded: no acknowledged write lost on
// either fleet (the data judge), never more than one member of a fleet away (the API server's
// record through the contract judge, and the member processes sampled on the machine), each
// drain within drainBound, the fleets Steady at their sizes at the end, and no member deleted by
// the operator.
//
// A PersistentFleet member's disk is on its node: its evicted Pod's replacement waits, Pending,
// until the node is uncordoned, so the drain completes when the Pod is gone and the member comes
// back after. The next drain then waits, refused, until it is Ready.
func TestRollingNodeMaintenanceOnRealNodes(t *testing.T) {
	f := newFixture(t)
	f.judge.AttributeBy(auditLog())
	nodes := realNodes(t, f.ctx)
	// However the test ends, the tests that follow need every node schedulable and both operator
	// replicas Ready again: the drains evict them.
	t.Cleanup(func() { uncordonAll(nodes); scaleOperator(t, context.Background(), 2) })

	pf := f.create(f.newFleet("pf", v1alpha1.ProfilePersistentFleet, 3))
	bk := f.create(f.newFleet("bk", v1alpha1.ProfileBucket, 2))
	pf, bk = f.waitConverged(pf.Name), f.waitConverged(bk.Name)
	pfLoad, bkLoad := f.startLoad(pf), f.startLoad(bk)
	waitFor(t, f.ctx, "the first acknowledged writes on both fleets", 2*time.Minute, func() bool {
		return journalLen(pfLoad) > 50 && journalLen(bkLoad) > 50
	})
	away := f.watchAway(pf, bk)

	start := time.Now()
	var (
		evictedMembers int
		total          drainOutcome
		drains         []drainOutcome
		took           []string
	)
	for round := 1; round <= 2; round++ {
		for i, node := range nodes {
			var during func()
			if round == 1 && i == 0 {
				// A scale-in asked for while a member is away waits for it, as the contract says.
				during = func() {
					f.update(pf.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Members = 2 })
					// What the person running the drain sees, once the operator has read the
					// scale-in: the drain may have evicted its leader too, and the standby takes
					// the lease only when it expires.
					for _, name := range []string{pf.Name, bk.Name} {
						var cur *v1alpha1.CelldFleet
						_ = wait.PollUntilContextTimeout(f.ctx, poll, 30*time.Second, true, func(ctx context.Context) (bool, error) {
							var err error
							cur, err = suite.celld.CelldV1alpha1().CelldFleets(f.ns).Get(ctx, name, metav1.GetOptions{})
							return err == nil && cur.Status.ObservedGeneration == cur.Generation, nil
						})
						if cur != nil {
							t.Logf("during the drain, fleet %s (generation %d, observed %d): state %s, members %d ready of %d; %s", cur.Name,
								cur.Generation, cur.Status.ObservedGeneration, cur.Status.State, cur.Status.Members.Ready, cur.Spec.Members, conditions(cur))
						}
					}
				}
			}
			d, err := drain(f.ctx, drainBound, during, node)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			mine := d.evictedIn(f.ns)
			t.Logf("+%s round %d: drained %s in %s: evicted %v (and %v elsewhere), refused by a budget %d times %v",
				time.Since(start).Round(100*time.Millisecond), round, node, d.took.Round(100*time.Millisecond), mine,
				d.evictedOutside(f.ns), d.refusals(), d.refused)
			if round == 1 && i == 0 && !containsPrefix(mine, pf.Name+"-") {
				t.Fatalf("the first node drained, %s, ran no member of %s: the scale-in was asked for with none away", node, pf.Name)
			}
			if d.took > drainBound {
				t.Errorf("drain of %s took %s; want at most %s", node, d.took.Round(100*time.Millisecond), drainBound)
			}
			evictedMembers += len(mine)
			took = append(took, d.took.Round(100*time.Millisecond).String())
			total.add(d)
			drains = append(drains, d)
		}
	}
	t.Logf("%d drains in %s (each %v): %d members evicted, %d evictions refused by a budget, longest drain %s",
		2*len(nodes), time.Since(start).Round(time.Second), took, evictedMembers, total.refusals(), total.took.Round(100*time.Millisecond))
	for _, d := range drains {
		for key := range d.unready {
			t.Logf("%s was not Ready when its eviction was allowed (at %s): the budget let it go whatever the others", key, d.evicted[key].Format("15:04:05.000"))
		}
	}

	pf, bk = f.waitConverged(pf.Name), f.waitConverged(bk.Name)
	f.waitMembersUp(pf)
	f.waitMembersUp(bk)
	if pf.Status.Members.Current != 2 || bk.Status.Members.Current != 2 {
		t.Errorf("members at the end: %s %d (want the 2 asked for during the first drain), %s %d (want 2)",
			pf.Name, pf.Status.Members.Current, bk.Name, bk.Status.Members.Current)
	}
	most := away.end(t)
	for _, name := range []string{pf.Name, bk.Name} {
		if most[name] > 1 {
			t.Errorf("fleet %s: %d members away at once, from its processes; a drain takes one at a time", name, most[name])
		}
	}

	// The budget counts a member Ready until its probe has failed three times, 10 s apart: an
	// eviction it allows may come while celld on another member of the fleet already answers
	// not ready (some keys it holds not yet on two live members, after a member left). Counted
	// and shown, not failed on: the probe's timing is the renderer's open question
	// (docs/node-maintenance.md), and this is the window it leaves.
	exposed := 0
	for _, d := range drains {
		for key, at := range d.evicted {
			name, ok := strings.CutPrefix(key, f.ns+"/")
			if !ok {
				continue
			}
			fleet := pf.Name
			if strings.HasPrefix(name, bk.Name+"-") {
				fleet = bk.Name
			}
			if others := away.notReadyBefore(fleet, at, name); len(others) > 0 {
				exposed++
				t.Logf("the budget allowed %s's eviction at %s while celld on the fleet's other members answered: %v", name, at.Format("15:04:05.000"), others)
			}
		}
	}
	t.Logf("%d of %d evictions allowed while another member of the fleet answered not ready", exposed, evictedMembers)

	for _, c := range []struct {
		fl  *v1alpha1.CelldFleet
		run *loadRun
	}{{pf, pfLoad}, {bk, bkLoad}} {
		rep := f.check(c.fl, c.run)
		if rep.Checked == 0 || rep.Checked != c.run.stats.Acked {
			t.Errorf("fleet %s: checked %d writes, the load client had %d acknowledged", c.fl.Name, rep.Checked, c.run.stats.Acked)
		}
		if len(rep.Lost) != 0 {
			t.Errorf("fleet %s: %d acknowledged writes lost:\n%s", c.fl.Name, len(rep.Lost), rep)
		}
		t.Logf("fleet %s: %d writes acknowledged, %d not, %d lost", c.fl.Name, c.run.stats.Acked, c.run.stats.Failed, len(rep.Lost))
	}

	v, versions := f.judge.Judgement(t)
	for _, msg := range v.Violations {
		t.Errorf("contract: %s", msg)
	}
	t.Logf("contract: %d checks over %d recorded versions, %d violations; %s", v.Checks, versions, len(v.Violations), v.Summary())
	if v.Explained["Pod: evicted"] != evictedMembers {
		t.Errorf("the judge put %d deletions down to an eviction; the drains evicted %d members", v.Explained["Pod: evicted"], evictedMembers)
	}
	for why, n := range v.Explained {
		if why != "Pod: evicted" && why != "Pod: scale-down" {
			t.Errorf("%d member deletions explained by %q: the drains and the scale-in explain them all", n, why)
		}
	}
	f.noMemberDeletedByOperator()
}

// TestCrashLoopingMemberDoesNotBlockDrain: a PersistentFleet member made to crash-loop (its celld
// killed as soon as it starts, until the kubelet backs off) is away already. The drain of another
// node must wait while it is (the budget refuses to take a healthy member), and the drain of its
// own node must not: the budget lets a member that is not Ready go while every other member is
// Ready (unhealthyPodEvictionPolicy IfHealthyBudget). Once the crash-looping member is back on
// its node, Ready, the waiting drain goes through. Then a member made to crash-loop while
// another's node is in maintenance, its member away: its eviction is refused until that member
// is back (celld may answer not ready because it holds the last live copy of a key), and then
// goes. No acknowledged write is lost, and the contract judge is silent.
func TestCrashLoopingMemberDoesNotBlockDrain(t *testing.T) {
	f := newFixture(t)
	f.judge.AttributeBy(auditLog())
	nodes := realNodes(t, f.ctx)
	// However the test ends, the tests that follow need every node schedulable and both operator
	// replicas Ready again: the drains evict them.
	t.Cleanup(func() { uncordonAll(nodes); scaleOperator(t, context.Background(), 2) })
	fl := f.waitConverged(f.create(f.newFleet("cl", v1alpha1.ProfilePersistentFleet, 3)).Name)
	run := f.startLoad(fl)
	waitFor(t, f.ctx, "the first acknowledged writes", 2*time.Minute, func() bool { return journalLen(run) > 50 })
	pods := f.members(fl)
	x, y := pods[0], pods[1]
	if x.Spec.NodeName == y.Spec.NodeName {
		t.Fatalf("members %s and %s share node %s", x.Name, y.Name, x.Spec.NodeName)
	}

	t.Logf("make %s crash-loop on %s", x.Name, x.Spec.NodeName)
	stopCrash := crashLoop(fl.UID, x.Name)
	t.Cleanup(stopCrash)
	waitFor(t, f.ctx, x.Name+" crash-looping", converge, func() bool {
		p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, x.Name, metav1.GetOptions{})
		if err == nil && p.UID == x.UID && !podReady(p) && restarts(p) >= 2 {
			t.Logf("%s not Ready, restarted %d times: %s", x.Name, restarts(p), waiting(p))
			return true
		}
		return false
	})

	t.Logf("drain %s (healthy %s) while %s is away", y.Spec.NodeName, y.Name, x.Name)
	type result struct {
		d   drainOutcome
		err error
	}
	other := make(chan result, 1)
	go func() {
		d, err := drain(f.ctx, drainBound+converge, nil, y.Spec.NodeName)
		other <- result{d, err}
	}()
	// Three refusals are 10-15 s: longer than the kubelet's readiness probe takes to count a
	// member not Ready (the chart's default: period 2 s, three failures), were the crash loop to
	// spill over.
	asked := time.Now()
	waitFor(t, f.ctx, "three refusals of "+y.Name+"'s eviction", 2*time.Minute, func() bool {
		if p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, y.Name, metav1.GetOptions{}); err != nil || p.UID != y.UID || p.DeletionTimestamp != nil {
			t.Fatalf("healthy member %s was evicted while %s crash-looped (%v)", y.Name, x.Name, err)
		}
		return refusalsOf(f, y, asked.Add(-time.Second)) >= 3
	})
	if ps := processes(fl.UID)[y.Name]; len(ps) != 1 {
		t.Fatalf("healthy member %s: %d processes while its eviction is refused, want 1", y.Name, len(ps))
	}

	t.Logf("drain %s, where %s crash-loops", x.Spec.NodeName, x.Name)
	dx, err := drain(f.ctx, drainBound, stopCrash, x.Spec.NodeName)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("drained %s in %s: evicted %v, refused by a budget %d times %v", x.Spec.NodeName, dx.took.Round(100*time.Millisecond),
		dx.evictedIn(f.ns), dx.refusals(), dx.refused)
	if n := dx.refused[f.ns+"/"+x.Name]; n != 0 {
		t.Errorf("the eviction of crash-looping %s was refused %d times: a member that is not Ready blocks its node's drain", x.Name, n)
	}
	if dx.took > drainBound {
		t.Errorf("drain of %s took %s; want at most %s", x.Spec.NodeName, dx.took.Round(100*time.Millisecond), drainBound)
	}

	var back time.Time
	waitFor(t, f.ctx, x.Name+" back on its node, Ready", converge, func() bool {
		p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, x.Name, metav1.GetOptions{})
		if err != nil || p.UID == x.UID || !podReady(p) {
			return false
		}
		if p.Spec.NodeName != x.Spec.NodeName {
			t.Errorf("member %s came back on %s, not on %s where its disk is", p.Name, p.Spec.NodeName, x.Spec.NodeName)
		}
		back = readySince(p)
		return true
	})
	var r result
	select {
	case r = <-other:
	case <-time.After(drainBound + converge):
		t.Fatalf("the drain of %s did not end", y.Spec.NodeName)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	key := f.ns + "/" + y.Name
	evictedAt, ok := r.d.evicted[key]
	t.Logf("drained %s in %s: evicted %v, %s's eviction refused %d times; %s Ready again at %s, %s evicted at %s",
		y.Spec.NodeName, r.d.took.Round(100*time.Millisecond), r.d.evictedIn(f.ns), y.Name, r.d.refused[key],
		x.Name, back.Format("15:04:05"), y.Name, evictedAt.Format("15:04:05.000"))
	switch {
	case !ok:
		t.Errorf("the drain of %s did not evict %s", y.Spec.NodeName, y.Name)
	// The Ready condition's time has whole seconds.
	case evictedAt.Before(back.Add(-time.Second)):
		t.Errorf("%s evicted at %s, before %s was back at %s", y.Name, evictedAt.Format(time.RFC3339Nano), x.Name, back.Format(time.RFC3339))
	}
	fl = f.waitConverged(fl.Name)
	f.waitMembersUp(fl)

	// A member that crash-loops while another is away already, its node still in maintenance:
	// the budget is spent (one Ready member of three), and a member that is not Ready may hold
	// the last copy of a key the away member held. Its node's drain waits until the away member
	// is back, and then goes at once.
	pods = f.members(fl)
	x, y = pods[2], pods[0]
	t.Logf("drain %s (%s), and while it is in maintenance make %s crash-loop and drain %s", y.Spec.NodeName, y.Name, x.Name, x.Spec.NodeName)
	xDrain := make(chan result, 1)
	dy, err := drain(f.ctx, drainBound+converge, func() {
		stop := crashLoop(fl.UID, x.Name)
		t.Cleanup(stop)
		waitFor(t, f.ctx, x.Name+" crash-looping", converge, func() bool {
			p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, x.Name, metav1.GetOptions{})
			return err == nil && p.UID == x.UID && !podReady(p) && restarts(p) >= 1
		})
		asked := time.Now()
		go func() {
			d, err := drain(f.ctx, drainBound+converge, stop, x.Spec.NodeName)
			xDrain <- result{d, err}
		}()
		waitFor(t, f.ctx, "two refusals of crash-looping "+x.Name+"'s eviction", 2*time.Minute, func() bool {
			if p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, x.Name, metav1.GetOptions{}); err != nil || p.UID != x.UID || p.DeletionTimestamp != nil {
				t.Fatalf("crash-looping %s was evicted while %s was away (%v)", x.Name, y.Name, err)
			}
			return refusalsOf(f, x, asked.Add(-time.Second)) >= 2
		})
	}, y.Spec.NodeName)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("drained %s in %s: evicted %v", y.Spec.NodeName, dy.took.Round(100*time.Millisecond), dy.evictedIn(f.ns))
	var yBack time.Time
	waitFor(t, f.ctx, y.Name+" back on its node, Ready", converge, func() bool {
		p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, y.Name, metav1.GetOptions{})
		if err != nil || p.UID == y.UID || !podReady(p) {
			return false
		}
		yBack = readySince(p)
		return true
	})
	var rx result
	select {
	case rx = <-xDrain:
	case <-time.After(drainBound + converge):
		t.Fatalf("the drain of %s did not end once %s was back", x.Spec.NodeName, y.Name)
	}
	if rx.err != nil {
		t.Fatal(rx.err)
	}
	xKey := f.ns + "/" + x.Name
	xAt, ok := rx.d.evicted[xKey]
	t.Logf("drained %s in %s: %s's eviction refused %d times; %s Ready again at %s, %s evicted at %s",
		x.Spec.NodeName, rx.d.took.Round(100*time.Millisecond), x.Name, rx.d.refused[xKey], y.Name, yBack.Format("15:04:05"), x.Name, xAt.Format("15:04:05.000"))
	switch {
	case !ok:
		t.Errorf("the drain of %s did not evict crash-looping %s", x.Spec.NodeName, x.Name)
	// The Ready condition's time has whole seconds.
	case xAt.Before(yBack.Add(-time.Second)):
		t.Errorf("crash-looping %s evicted at %s, before %s was back at %s: two members away", x.Name, xAt.Format(time.RFC3339Nano), y.Name, yBack.Format(time.RFC3339))
	}

	fl = f.waitConverged(fl.Name)
	f.waitMembersUp(fl)
	rep := f.check(fl, run)
	if len(rep.Lost) != 0 || rep.Checked != run.stats.Acked {
		t.Errorf("%d of %d acknowledged writes lost (%d checked):\n%s", len(rep.Lost), run.stats.Acked, rep.Checked, rep)
	}
	t.Logf("fleet %s: %d writes acknowledged, %d not, %d lost", fl.Name, run.stats.Acked, run.stats.Failed, len(rep.Lost))
	f.verify()
	f.noMemberDeletedByOperator()
}

// TestLooseBudgetDrainTakesTwoMembers: the checks can fail. With the operator stopped, so that
// it does not put its budget back, the fleet's PodDisruptionBudget is loosened to maxUnavailable
// 2, as a hand edit or an operator that rendered it wrong would, and two members' nodes are
// drained together, as a node pool upgrade that takes two nodes at a time does. Both members go
// at once: the member processes sampled on the machine and the contract judge, from the API
// server's record alone, must both say so.
func TestLooseBudgetDrainTakesTwoMembers(t *testing.T) {
	f := newFixture(t)
	f.judge.AttributeBy(auditLog())
	nodes := realNodes(t, f.ctx)
	// However the test ends, the tests that follow need every node schedulable and both operator
	// replicas Ready again: the drains evict them.
	t.Cleanup(func() { uncordonAll(nodes); scaleOperator(t, context.Background(), 2) })
	fl := f.waitConverged(f.create(f.newFleet("loose", v1alpha1.ProfilePersistentFleet, 3)).Name)
	run := f.startLoad(fl)
	waitFor(t, f.ctx, "acknowledged writes on every member", 2*time.Minute, func() bool { return journalLen(run) > 300 })
	away := f.watchAway(fl)

	ctx := context.Background()
	scaleOperator(t, ctx, 0)
	pdbs := suite.kube.PolicyV1().PodDisruptionBudgets(f.ns)
	if _, err := pdbs.Patch(f.ctx, fl.Name, types.MergePatchType, []byte(`{"spec":{"maxUnavailable":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("loosen the budget: %v", err)
	}
	waitFor(t, f.ctx, "the loosened budget counted", time.Minute, func() bool {
		b, err := pdbs.Get(f.ctx, fl.Name, metav1.GetOptions{})
		return err == nil && b.Status.ObservedGeneration == b.Generation && b.Status.DisruptionsAllowed == 2
	})

	pods := f.members(fl)
	both := []string{pods[0].Spec.NodeName, pods[1].Spec.NodeName}
	// Held drained a moment, as a node's maintenance is: long enough for the sampler to see it.
	d, err := drain(f.ctx, drainBound, func() { time.Sleep(3 * time.Second) }, both...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("drained %v together in %s: evicted %v, refused by a budget %d times", both, d.took.Round(100*time.Millisecond), d.evictedIn(f.ns), d.refusals())
	if n := len(d.evictedIn(f.ns)); n != 2 || d.refused[f.ns+"/"+pods[1].Name]+d.refused[f.ns+"/"+pods[0].Name] != 0 {
		t.Fatalf("the loosened budget let %d members go with %d refusals; the test needs both at once", n, d.refusals())
	}

	scaleOperator(t, ctx, 2)
	waitFor(t, f.ctx, "the operator's budget put back", converge, func() bool {
		b, err := pdbs.Get(f.ctx, fl.Name, metav1.GetOptions{})
		return err == nil && b.Spec.MaxUnavailable != nil && b.Spec.MaxUnavailable.IntValue() == 1
	})
	fl = f.waitConverged(fl.Name)
	f.waitMembersUp(fl)
	most := away.end(t)
	if most[fl.Name] < 2 {
		t.Errorf("two members' nodes drained under a budget of 2, and the processes showed at most %d member away at once: the sampler cannot tell", most[fl.Name])
	} else {
		t.Logf("as it must, the processes showed %d members of %s away at once", most[fl.Name], fl.Name)
	}

	rep := f.check(fl, run)
	t.Logf("fleet %s: %d writes acknowledged, %d not (last refusal: %s), %d lost", fl.Name, run.stats.Acked, run.stats.Failed,
		run.stats.LastError, len(rep.Lost))

	v, versions := f.judge.Judgement(t)
	flagged := 0
	for _, msg := range v.Violations {
		if strings.HasPrefix(msg, "drain: Pod "+fl.Name+"-") && strings.Contains(msg, "while 1 other member(s) of its fleet were away") {
			flagged++
		}
	}
	if flagged != 1 {
		t.Errorf("the contract's judge flagged the second eviction %d times, want once (%d checks over %d versions); its violations:\n%s",
			flagged, v.Checks, versions, strings.Join(v.Violations, "\n"))
	} else {
		t.Logf("as it must, the contract's judge flagged the second eviction: %s", v.Summary())
	}
}

// TestReadinessWindowLetsDrainTakeTwo measures, on real nodes, the window the rendered readiness
// probe leaves (Kubernetes' timing: every 10 s, three failures): how long a member whose celld
// stopped answering (frozen, as a process stuck on its disk is) is still counted Ready by the
// budget. A drain of another member's node that asks once kubectl drain's retry interval has
// passed since the freeze gets its eviction allowed while the frozen member is counted Ready, and
// two members are away at once; asked after the budget saw the member go, it is refused. The
// test asserts that the budget, the sampled processes and the contract judge each tell what
// they can: the processes two away, the budget and the judge (both reading Pod readiness) only
// once the probe has failed three times.
func TestReadinessWindowLetsDrainTakeTwo(t *testing.T) {
	f := newFixture(t)
	f.judge.AttributeBy(auditLog())
	nodes := realNodes(t, f.ctx)
	// However the test ends, the tests that follow need every node schedulable and both operator
	// replicas Ready again: the drains evict them.
	t.Cleanup(func() { uncordonAll(nodes); scaleOperator(t, context.Background(), 2) })
	// Kubernetes' probe timing, named: the chart's readiness default would shorten the window.
	slow := f.newFleet("window", v1alpha1.ProfilePersistentFleet, 3)
	slow.Spec.Readiness = kubernetesReadiness()
	fl := f.waitConverged(f.create(slow).Name)
	run := f.startLoad(fl)
	waitFor(t, f.ctx, "acknowledged writes on every member", 2*time.Minute, func() bool { return journalLen(run) > 300 })
	away := f.watchAway(fl)
	pods := f.members(fl)
	x, y := pods[0], pods[1]
	ps := processes(fl.UID)[x.Name]
	if len(ps) != 1 {
		t.Fatalf("member %s: %d processes, want 1", x.Name, len(ps))
	}
	thaw := func() { _ = syscall.Kill(ps[0].pid, syscall.SIGCONT) }
	t.Cleanup(thaw)
	if err := syscall.Kill(ps[0].pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	t.Logf("froze %s (pid %d) on %s; drain %s (%s) %s later", x.Name, ps[0].pid, x.Spec.NodeName, y.Spec.NodeName, y.Name, evictionRetry)
	time.Sleep(evictionRetry)

	// Thawed once counted not Ready, whatever the drain does meanwhile: a drain refused waits for
	// it to be back.
	seen := make(chan time.Time, 1)
	go func() {
		defer close(seen)
		_ = wait.PollUntilContextTimeout(f.ctx, poll, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := suite.kube.CoreV1().Pods(f.ns).Get(ctx, x.Name, metav1.GetOptions{})
			if err != nil || podReady(p) {
				return false, nil
			}
			seen <- readySince(p)
			return true, nil
		})
		thaw()
	}()
	d, err := drain(f.ctx, drainBound, nil, y.Spec.NodeName)
	if err != nil {
		t.Fatal(err)
	}
	notReady, ok := <-seen
	if !ok {
		t.Fatalf("frozen %s still counted Ready 2 minutes on", x.Name)
	}
	key := f.ns + "/" + y.Name
	evictedAt, allowed := d.evicted[key]
	window := notReady.Sub(frozen)
	t.Logf("%s counted not Ready %s after it stopped answering (the API server's time, whole seconds); %s's eviction refused %d times, allowed at +%s",
		x.Name, window.Round(time.Second), y.Name, d.refused[key], evictedAt.Sub(frozen).Round(100*time.Millisecond))

	fl = f.waitConverged(fl.Name)
	f.waitMembersUp(fl)
	most := away.end(t)
	// The Ready condition's time has whole seconds.
	inWindow := allowed && evictedAt.Before(notReady.Add(-time.Second))
	switch {
	case !allowed:
		t.Errorf("%s was not evicted", y.Name)
	case inWindow && most[fl.Name] < 2:
		t.Errorf("%s was evicted while frozen %s was counted Ready, and the processes showed at most %d member away at once", y.Name, x.Name, most[fl.Name])
	case !inWindow && d.refused[key] == 0:
		t.Errorf("%s evicted at the first ask, after %s was counted not Ready: the budget let a second member go", y.Name, x.Name)
	case inWindow:
		t.Logf("within the probe's window of %s the drain took %s while %s was frozen: %d members away at once, from the processes",
			window.Round(time.Second), y.Name, x.Name, most[fl.Name])
	}

	rep := f.check(fl, run)
	t.Logf("fleet %s: %d writes acknowledged, %d not, %d lost", fl.Name, run.stats.Acked, run.stats.Failed, len(rep.Lost))
	// The judge reads what the API server recorded: a frozen member counted Ready is, to it, a
	// member present, so it cannot see the window; the processes do.
	v, versions := f.judge.Judgement(t)
	t.Logf("contract: %d checks over %d recorded versions, %d violations; %s\n%s", v.Checks, versions, len(v.Violations), v.Summary(), strings.Join(v.Violations, "\n"))
}

// --- draining, as kubectl drain does --------------------------------------------------------------

// drainOutcome is what one drain did, or several.
type drainOutcome struct {
	took time.Duration
	// evicted is when each Pod's eviction was allowed, by namespace/name; refused is how many
	// times a budget refused it.
	evicted map[string]time.Time
	refused map[string]int
	// unready are the Pods Kubernetes counted not Ready when their eviction was asked for and
	// allowed: the budget lets those go only while every other member is Ready.
	unready map[string]bool
}

func (d *drainOutcome) add(o drainOutcome) {
	d.took = max(d.took, o.took)
	if d.evicted == nil {
		d.evicted, d.refused, d.unready = map[string]time.Time{}, map[string]int{}, map[string]bool{}
	}
	for k, v := range o.unready {
		d.unready[k] = v
	}
	for k, v := range o.evicted {
		d.evicted[k] = v
	}
	for k, v := range o.refused {
		d.refused[k] += v
	}
}

func (d drainOutcome) refusals() int {
	n := 0
	for _, r := range d.refused {
		n += r
	}
	return n
}

func (d drainOutcome) evictedIn(ns string) []string {
	var out []string
	for k := range d.evicted {
		if name, ok := strings.CutPrefix(k, ns+"/"); ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func (d drainOutcome) evictedOutside(ns string) []string {
	var out []string
	for k := range d.evicted {
		if !strings.HasPrefix(k, ns+"/") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// drain drains nodes as kubectl drain --ignore-daemonsets --delete-emptydir-data does: cordons
// them, asks at once for the eviction of every Pod on them, in every namespace, each retried
// every evictionRetry while a budget refuses, runs during (if any) once all are evicted, waits
// until they are gone, and uncordons the nodes: their maintenance is done. Several nodes are
// drained together, as a node pool upgrade that takes more than one node at a time does. It
// fails past bound.
func drain(ctx context.Context, bound time.Duration, during func(), nodes ...string) (drainOutcome, error) {
	start := time.Now()
	deadline := start.Add(bound)
	d := drainOutcome{evicted: map[string]time.Time{}, refused: map[string]int{}, unready: map[string]bool{}}
	var pods []corev1.Pod
	for _, node := range nodes {
		if err := setUnschedulable(ctx, node, true); err != nil {
			return d, err
		}
		defer func() { _ = setUnschedulable(context.Background(), node, false) }()
		l, err := suite.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return d, fmt.Errorf("list Pods on %s: %w", node, err)
		}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil && !daemonOrMirror(&p) {
				pods = append(pods, p)
			}
		}
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for _, p := range pods {
		wg.Go(func() {
			key := p.Namespace + "/" + p.Name
			err := evict(ctx, p, deadline, func(evicted, ready bool) {
				mu.Lock()
				defer mu.Unlock()
				if evicted {
					d.evicted[key] = time.Now()
					if !ready {
						d.unready[key] = true
					}
				} else {
					d.refused[key]++
				}
			})
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return d, fmt.Errorf("drain of %v: %w", nodes, err)
	}
	if during != nil {
		during()
	}
	for _, p := range pods {
		err := wait.PollUntilContextTimeout(ctx, poll, time.Until(deadline), true, func(ctx context.Context) (bool, error) {
			cur, err := suite.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err) || (err == nil && cur.UID != p.UID), nil
		})
		if err != nil {
			return d, fmt.Errorf("drain of %v: Pod %s/%s evicted, not gone within %s", nodes, p.Namespace, p.Name, bound)
		}
	}
	d.took = time.Since(start)
	return d, nil
}

// evict asks for one Pod's eviction until a budget allows it or the Pod leaves anyway, telling
// note of each answer, and fails past deadline. A Pod that started leaving meanwhile (its
// StatefulSet's scale-down) is not asked for again: the API server would answer 201 without
// asking the budget, for a deletion the drain did not make.
func evict(ctx context.Context, p corev1.Pod, deadline time.Time, note func(evicted, ready bool)) error {
	refused := 0
	for {
		// As the budget is about to see it: ready or not, and not leaving already.
		ready := podReady(&p)
		cur, err := suite.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || (err == nil && (cur.UID != p.UID || cur.DeletionTimestamp != nil)):
			return nil
		case err == nil:
			ready = podReady(cur)
		}
		err = suite.kube.CoreV1().Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
		switch {
		case err == nil:
			note(true, ready)
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsTooManyRequests(err):
			return fmt.Errorf("evict %s/%s: %w", p.Namespace, p.Name, err)
		}
		note(false, ready)
		refused++
		if time.Now().Add(evictionRetry).After(deadline) {
			return fmt.Errorf("evict %s/%s: refused %d times, the last: %w", p.Namespace, p.Name, refused, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(evictionRetry):
		}
	}
}

// daemonOrMirror: the Pods kubectl drain leaves (--ignore-daemonsets), or cannot evict.
func daemonOrMirror(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "DaemonSet"
}

func setUnschedulable(ctx context.Context, node string, on bool) error {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := suite.kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cordon %s (%t): %w", node, on, err)
	}
	return nil
}

func uncordonAll(nodes []string) {
	for _, n := range nodes {
		_ = setUnschedulable(context.Background(), n, false)
	}
}

// realNodes lists the real nodes, by name; every one must be Ready and schedulable, as a
// maintenance round starts.
func realNodes(t *testing.T, ctx context.Context) []string {
	t.Helper()
	l, err := suite.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range l.Items {
		n := &l.Items[i]
		if !strings.HasPrefix(n.Name, "real-node-") {
			continue
		}
		if !nodeReady(n) || n.Spec.Unschedulable {
			t.Fatalf("node %s is not Ready and schedulable", n.Name)
		}
		out = append(out, n.Name)
	}
	sort.Strings(out)
	if len(out) < 3 {
		t.Fatalf("%d real nodes, want 3", len(out))
	}
	return out
}

// refusalsOf counts the refused evictions of Pod p the audit log recorded since from.
func refusalsOf(f *fixture, p corev1.Pod, since time.Time) int {
	reqs, err := contract.ReadAudit(auditLog(), f.ns)
	if err != nil {
		f.t.Fatal(err)
	}
	n := 0
	for _, r := range reqs {
		if r.Eviction && r.Name == p.Name && r.Code == 429 && r.At.After(since) {
			n++
		}
	}
	return n
}

// noMemberDeletedByOperator: the operator deletes no member during maintenance; the drains and
// the workloads' controllers do (from the audit log).
func (f *fixture) noMemberDeletedByOperator() {
	f.t.Helper()
	reqs, err := contract.ReadAudit(auditLog(), f.ns)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range reqs {
		if r.Resource == "pods" && !r.Eviction && r.ByOperator() {
			f.t.Errorf("the operator deleted member %s during maintenance: %s", r.Name, r)
		}
	}
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

// waiting says why a Pod's containers wait or last ended, as kubectl describe shows it.
func waiting(p *corev1.Pod) string {
	var parts []string
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			parts = append(parts, c.Name+" waiting: "+w.Reason)
		}
		if l := c.LastTerminationState.Terminated; l != nil {
			parts = append(parts, fmt.Sprintf("%s last ended: %s (exit %d)", c.Name, l.Reason, l.ExitCode))
		}
	}
	return strings.Join(parts, "; ")
}

// waitMembersUp waits until every member the fleet asks for has a Pod that is Ready, has an
// address and is not terminating. The fleet's status alone can be stale for a while after a
// drain evicted the operator's leader: the standby takes the lease only once it expires.
func (f *fixture) waitMembersUp(fl *v1alpha1.CelldFleet) {
	f.t.Helper()
	waitFor(f.t, f.ctx, "every member of "+fl.Name+" Ready", converge, func() bool {
		cur, err := suite.celld.CelldV1alpha1().CelldFleets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		pods := f.members(cur)
		up := 0
		for _, p := range pods {
			if p.DeletionTimestamp == nil && podReady(&p) && p.Status.PodIP != "" {
				up++
			}
		}
		return up == len(pods) && up == int(cur.Spec.Members)
	})
}

// readySince is when the Pod last became Ready (whole seconds, as the API server keeps it).
func readySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func conditions(fl *v1alpha1.CelldFleet) string {
	var parts []string
	for _, c := range fl.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

func containsPrefix(xs []string, prefix string) bool {
	for _, x := range xs {
		if strings.HasPrefix(x, prefix) {
			return true
		}
	}
	return false
}

func journalLen(r *loadRun) int {
	recs, _ := load.ReadJournal(r.journal)
	return len(recs)
}

// crashLoop kills member name's celld as soon as it is seen, until stopped: its container
// restarts, dies again, and the kubelet backs off, as with a member that cannot start.
func crashLoop(uid types.UID, name string) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			for _, m := range scanMembers(uid)[uid][name] {
				_ = syscall.Kill(m.pid, syscall.SIGKILL)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}

// --- members away, from the processes -------------------------------------------------------------

// proc is one celld process: its member's name and its Pod's address.
type proc struct {
	pid  int
	name string
	ip   string
	port string
}

// scanMembers lists the celld processes of the fleets of the given UIDs, by fleet UID and member
// name, in one pass over /proc (a pass reads every process's command name, and only celld's
// environment).
func scanMembers(uids ...types.UID) map[types.UID]map[string][]proc {
	want := map[string]bool{}
	out := map[types.UID]map[string][]proc{}
	for _, u := range uids {
		want[string(u)] = true
		out[u] = map[string][]proc{}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if strings.TrimSpace(string(comm)) != "celld" {
			continue
		}
		env := environ(pid)
		uid := env["CELLD_FLEET_UID"]
		if !want[uid] {
			continue
		}
		port := env["CELLD_CLIENT_PORT"]
		if port == "" {
			port = "7000"
		}
		name := env["CELLD_MEMBER_NAME"]
		out[types.UID(uid)][name] = append(out[types.UID(uid)][name], proc{pid: pid, name: name, ip: netnsAddr(pid), port: port})
	}
	return out
}

// netnsAddr is the address of the Pod network namespace process pid runs in: the one local
// address other than loopback its kernel routing table lists.
func netnsAddr(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/fib_trie", pid))
	if err != nil {
		return ""
	}
	lines := strings.Split(string(b), "\n")
	for i := 1; i < len(lines); i++ {
		if !strings.Contains(lines[i], "/32 host LOCAL") {
			continue
		}
		f := strings.Fields(lines[i-1])
		if len(f) > 0 && f[len(f)-1] != "127.0.0.1" {
			return f[len(f)-1]
		}
	}
	return ""
}

// memberState is what a member's process answers its readiness probe with.
type memberState int

const (
	// serving: ready, or not ready only for a state of the whole fleet's, not its own: some
	// keys it holds lacking their second copy a moment after another member went (it serves,
	// and copies them), or its bucket slow to answer on this loaded machine.
	serving memberState = iota
	// away: no process, or one not answering, or still catching up after it started.
	away
)

var probeClient = &http.Client{Timeout: 3 * time.Second}

// probe asks a member's process for /readyz as the kubelet would, and says whether the member
// counts as away, with its answer.
func probe(p proc) (memberState, string) {
	if p.ip == "" {
		return away, "no address"
	}
	resp, err := probeClient.Get("http://" + net.JoinHostPort(p.ip, p.port) + "/readyz")
	if err != nil {
		return away, "no answer"
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	why := strings.TrimSpace(string(body))
	switch {
	case resp.StatusCode == http.StatusOK:
		return serving, "ready"
	case strings.Contains(why, "catching up"):
		return away, why
	case strings.Contains(why, "live members"), strings.Contains(why, "bucket unreachable"):
		return serving, why
	}
	return away, why
}

// awaySampler samples, every 250 ms, how many members of each fleet are away from what its
// processes answer: its workload's replicas (from the API server) less the members whose celld
// runs and serves. It keeps the most away at once, by fleet, and each change of who is away.
type awaySampler struct {
	f        *fixture
	fleets   []*v1alpha1.CelldFleet
	mu       sync.Mutex
	most     map[string]int
	mostWhen map[string]string
	notReady map[string]int
	// timeline is every sample, by fleet: when, and which members' processes did not answer
	// ready, and why.
	timeline map[string][]sample
	changes  []string
	samples  int
	stop     chan struct{}
	done     chan struct{}
}

func (f *fixture) watchAway(fleets ...*v1alpha1.CelldFleet) *awaySampler {
	s := &awaySampler{f: f, fleets: fleets, most: map[string]int{}, mostWhen: map[string]string{}, notReady: map[string]int{}, timeline: map[string][]sample{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	f.t.Cleanup(func() {
		select {
		case <-s.stop:
		default:
			close(s.stop)
		}
		<-s.done
	})
	return s
}

func (s *awaySampler) run() {
	defer close(s.done)
	var uids []types.UID
	for _, fl := range s.fleets {
		uids = append(uids, fl.UID)
	}
	last := map[string]string{}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		procs := scanMembers(uids...)
		for _, fl := range s.fleets {
			wanted := workloadReplicas(s.f, fl.Name)
			if wanted < 0 {
				continue
			}
			var (
				mu       sync.Mutex
				wg       sync.WaitGroup
				serve    int
				notReady int
				states   []string
				why      = map[string]string{}
			)
			for name, ps := range procs[fl.UID] {
				p := ps[len(ps)-1]
				wg.Go(func() {
					st, reason := probe(p)
					mu.Lock()
					defer mu.Unlock()
					if st == serving {
						serve++
					}
					if reason != "ready" {
						notReady++
						states = append(states, name+": "+reason)
						why[name] = reason
					}
				})
			}
			wg.Wait()
			n := max(0, int(wanted)-serve)
			sort.Strings(states)
			now := time.Now().Format("15:04:05.000")
			desc := fmt.Sprintf("%d of %d away, %d processes not ready %v", n, wanted, notReady, states)
			s.mu.Lock()
			s.samples++
			s.timeline[fl.Name] = append(s.timeline[fl.Name], sample{at: time.Now(), notReady: why})
			if n > s.most[fl.Name] {
				s.most[fl.Name], s.mostWhen[fl.Name] = n, now+" "+desc
			}
			s.notReady[fl.Name] = max(s.notReady[fl.Name], notReady)
			if key := fmt.Sprint(n, states); key != last[fl.Name] {
				last[fl.Name] = key
				s.changes = append(s.changes, fmt.Sprintf("%s %s: %s", now, fl.Name, desc))
			}
			s.mu.Unlock()
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

type sample struct {
	at       time.Time
	notReady map[string]string
}

// notReadyBefore is what the processes of a fleet's members other than except answered in the
// last sample taken before at, for those that did not answer ready.
func (s *awaySampler) notReadyBefore(fleet string, at time.Time, except string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last *sample
	for i := range s.timeline[fleet] {
		if s.timeline[fleet][i].at.After(at) {
			break
		}
		last = &s.timeline[fleet][i]
	}
	if last == nil {
		return nil
	}
	var out []string
	for name, why := range last.notReady {
		if name != except {
			out = append(out, name+": "+why)
		}
	}
	sort.Strings(out)
	return out
}

// end stops the sampler, logs what it saw, and returns the most members away at once, by fleet.
func (s *awaySampler) end(t *testing.T) map[string]int {
	t.Helper()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Logf("members away, from the processes (%d samples), as they changed:\n%s", s.samples, strings.Join(s.changes, "\n"))
	for _, fl := range s.fleets {
		t.Logf("fleet %s: at most %d members away at once (%s); at most %d processes not answering ready at once",
			fl.Name, s.most[fl.Name], s.mostWhen[fl.Name], s.notReady[fl.Name])
	}
	return s.most
}

// workloadReplicas is the replicas of the fleet's StatefulSet or Deployment, -1 if neither is
// found.
func workloadReplicas(f *fixture, name string) int32 {
	if n := statefulSetReplicas(f, name); n >= 0 {
		return n
	}
	d, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil || d.Spec.Replicas == nil {
		return -1
	}
	return *d.Spec.Replicas
}
