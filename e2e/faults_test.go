package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

const (
	faultRate = 0.1
	faultSeed = 6
	// operatorQPS is the request rate a hot loop is judged against: 20/s, a fifth of the
	// client-side limit each of the operator's clients has by default, so a loop is caught long
	// before a limiter would slow it.
	operatorQPS = 20
	// restWindow is how long the request rate at rest is measured.
	restWindow = 30 * time.Second
	// rounds of grow, shrink and new image.
	rounds = 2
)

// TestAPIFaults: with one API request in ten failed on purpose (500s, 409s, 429s, timeouts before
// the request is sent and after it was applied, dropped watches), fleets of both profiles are
// created, grown, shrunk and given a new image; every fleet converges, each scale-in goes one
// member per step after rollout, the operator deletes no Pod and no disk, and the request rate
// stays bounded: at rest under faults it is about what it is at rest without them.
func TestAPIFaults(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.startOperator(fmt.Sprintf("--api-fault-rate=%g", faultRate), fmt.Sprintf("--api-fault-seed=%d", faultSeed), "--resync-period=10s")
	start, startRequests := time.Now(), op.requests(t)
	judge := f.watchContract()

	persistent := f.newFleet("persistent", v1alpha1.ProfilePersistentFleet, 3)
	ordered := f.newFleet("ordered", v1alpha1.ProfileBucket, 3)
	ordered.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	deployment := f.newFleet("deployment", v1alpha1.ProfileBucket, 3)
	fleets := []*v1alpha1.CelldFleet{persistent, ordered, deployment}
	sets, deploys, pods, claims := f.recordStatefulSets(), f.deploymentRecorder(), f.recordPods(), f.recordClaims()
	for i, fl := range fleets {
		fl.Spec.Capacity.ScaleInStabilization = duration(0)
		fleets[i] = f.create(fl)
	}
	convergeAll := func(what string) {
		t.Helper()
		for i, fl := range fleets {
			fleets[i] = f.waitConverged(fl.Name)
		}
		t.Logf("%s: every fleet converged after %s", what, time.Since(start).Round(time.Second))
	}
	convergeAll("created at 3")
	// Each member is replaced once by a rollout only if the fake kubelet cannot delete the
	// replacement: see nodeAgentPolicy.
	f.nodeAgentDeletesTerminatingPodsOnly(fleets[0])
	sts := []string{persistent.Name, ordered.Name}
	from := int32(3)
	for round := 1; round <= rounds; round++ {
		// Grow to 5: one change each, no member lost.
		podsFrom, before := len(pods.Events(t)), f.replicaChangeCounts(sets, deploys, sts, deployment.Name)
		for _, fl := range fleets {
			f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 5 })
		}
		convergeAll(fmt.Sprintf("round %d: grown to 5", round))
		for _, name := range sts {
			grow := statefulSetChanges(sets.Await(t, name+" rolled out at 5", rolledOutAt(name, 5)), name)[before[name]:]
			if len(grow) != 1 || grow[0].from != from || grow[0].to != 5 {
				t.Errorf("%s: grow %d to 5: want one change of spec.replicas, got %s", name, from, formatChanges(grow))
			}
		}
		dgrow := deploymentChanges(deploys.Await(t, "deployment rolled out at 5", deploymentRolledOutAt(deployment.Name, 5)), deployment.Name)[before[deployment.Name]:]
		if len(dgrow) != 1 || dgrow[0].from != from || dgrow[0].to != 5 {
			t.Errorf("deployment: grow %d to 5: want one change of spec.replicas, got %+v", from, dgrow)
		}
		if dels := deletions(pods.Events(t)[podsFrom:]); len(dels) != 0 {
			t.Errorf("pods deleted while growing: %v", names(dels))
		}

		// Shrink 5 -> 2: one member per step, each after the previous rolled out; a StatefulSet
		// loses its highest ordinals, a Deployment as many Pods as steps.
		podsFrom, before = len(pods.Events(t)), f.replicaChangeCounts(sets, deploys, sts, deployment.Name)
		for _, fl := range fleets {
			f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 2 })
		}
		convergeAll(fmt.Sprintf("round %d: shrunk to 2", round))
		for _, name := range sts {
			evs := sets.Await(t, name+" rolled out at 2", rolledOutAt(name, 2))
			checkOneStepShrink(t, statefulSetChanges(evs, name)[before[name]:], 5, 2)
		}
		evs := deploys.Await(t, "deployment rolled out at 2", deploymentRolledOutAt(deployment.Name, 2))
		checkOneStepShrinkDeployment(t, deploymentChanges(evs, deployment.Name)[before[deployment.Name]:], 5, 2)
		byFleet := deletedPodsByFleet(pods.Events(t)[podsFrom:], fleets)
		for _, name := range sts {
			if got, want := strings.Join(byFleet[name], ","), name+"-2,"+name+"-3,"+name+"-4"; got != want {
				t.Errorf("%s: pods deleted by the scale-in: %s, want %s", name, got, want)
			}
		}
		if n := len(byFleet[deployment.Name]); n != 3 {
			t.Errorf("deployment: %d pods deleted by the scale-in 5 -> 2, want 3: %v", n, byFleet[deployment.Name])
		}

		// A new image for the StatefulSet fleets: every member replaced once, by the StatefulSet
		// controller, at the same size.
		podsFrom, before = len(pods.Events(t)), f.replicaChangeCounts(sets, deploys, sts, deployment.Name)
		img := fmt.Sprintf("%s-%d", image, round)
		for _, fl := range fleets[:2] {
			f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Image = img })
		}
		convergeAll(fmt.Sprintf("round %d: image %s", round, img))
		for _, name := range sts {
			f.waitMembersImage(fleets, name, img)
		}
		byFleet = deletedPodsByFleet(pods.Events(t)[podsFrom:], fleets)
		for _, name := range sts {
			if got, want := strings.Join(byFleet[name], ","), name+"-0,"+name+"-1"; got != want {
				t.Errorf("%s: pods deleted by the image change: %s, want %s (each member replaced once)", name, got, want)
			}
			if changes := statefulSetChanges(sets.Events(t), name)[before[name]:]; len(changes) != 0 {
				t.Errorf("%s: spec.replicas changed during the image change: %s", name, formatChanges(changes))
			}
		}
		if n := len(byFleet[deployment.Name]); n != 0 {
			t.Errorf("deployment: %d pods deleted while its spec did not change: %v", n, byFleet[deployment.Name])
		}
		from = 2
	}
	lifecycle, lifecycleRequests := time.Since(start), op.requests(t)-startRequests

	// The operator itself deleted no Pod (there was nothing to heal) and no disk.
	_, bySeries := op.counter(t, "celld_operator_api_requests_total")
	for series, n := range bySeries {
		if strings.Contains(series, `verb="delete"`) && (strings.Contains(series, `resource="pods"`) || strings.Contains(series, `resource="persistentvolumeclaims"`)) && n > 0 {
			t.Errorf("the operator sent %g delete requests %s", n, series)
		}
	}
	if dels := deletions(claims.Events(t)); len(dels) != 0 {
		t.Errorf("claims deleted: %v; no step of this lifecycle deletes a disk", names(dels))
	}
	t.Logf("contract: %d checks on what the API server recorded", judge.Verify(t))

	// At rest under faults: once the last writes landed, no write, and few reads.
	f.quiet(op, 3*time.Second)
	restFaulty, restWrites := f.restRate(op)
	faults, byKind := op.counter(t, "celld_operator_api_faults_injected_total")
	all := op.requests(t)

	// At rest without faults: an operator started afresh on the converged fleets, measured once
	// its initial lists and watches are behind it.
	op.stop(t)
	clean := f.startOperator("--resync-period=10s")
	for _, fl := range fleets {
		f.waitConverged(fl.Name)
	}
	f.quiet(clean, 5*time.Second)
	restClean, cleanWrites := f.restRate(clean)

	t.Logf("requests/s: %.2f over the lifecycle under faults (%g requests in %s), %.3f at rest under faults, %.3f at rest without faults (%s each); client QPS limit %d",
		lifecycleRequests/lifecycle.Seconds(), lifecycleRequests, lifecycle.Round(time.Second), restFaulty, restClean, restWindow, operatorQPS)
	t.Logf("faults injected: %g of %g requests (%.1f%%), by kind:%s", faults, all, 100*faults/all, formatSeries(byKind))
	// client-go's event recorder retries an Event whose write failed up to 10 s later, so under
	// faults an Event may land at rest; a write of anything else would be a decision made at rest.
	retried := 0.0
	for series, n := range restWrites {
		if strings.Contains(series, `resource="events"`) {
			retried += n
			delete(restWrites, series)
		}
	}
	if len(restWrites) != 0 || len(cleanWrites) != 0 {
		t.Errorf("writes at rest: under faults (Events aside):%s\nwithout faults:%s\nwant none", formatSeries(restWrites), formatSeries(cleanWrites))
	}
	t.Logf("writes at rest: under faults %g Events the recorder retried and nothing else; without faults none", retried)
	// No hot loop: a failed request is retried with backoff, never spun on. At rest under faults
	// the operator re-establishes the watches the faults break, and nothing else.
	if bound := 3*restClean + 1; restFaulty > bound || restFaulty > operatorQPS/20 {
		t.Errorf("at rest under faults %.3f requests/s: want at most 3 x %.3f (without faults) + 1, and under %d (a twentieth of the client's QPS limit)",
			restFaulty, restClean, operatorQPS/20)
	}
	if faults == 0 || len(byKind) < 5 {
		t.Errorf("only %g faults of %d kinds injected: the test did not test much", faults, len(byKind))
	}
}

// requests reads the operator's api_requests_total counter.
func (op *operator) requests(t *testing.T) float64 {
	t.Helper()
	n, _ := op.counter(t, "celld_operator_api_requests_total")
	return n
}

// restRate measures the operator's requests per second, and its writes by verb and resource,
// over restWindow.
func (f *fixture) restRate(op *operator) (float64, map[string]float64) {
	f.t.Helper()
	r0 := op.requests(f.t)
	_, w0 := op.writes(f.t)
	t0 := time.Now()
	select {
	case <-f.ctx.Done():
	case <-time.After(restWindow):
	}
	r1 := op.requests(f.t)
	_, w1 := op.writes(f.t)
	writes := map[string]float64{}
	for series, n := range w1 {
		if d := n - w0[series]; d != 0 {
			writes[series] = d
		}
	}
	return (r1 - r0) / time.Since(t0).Seconds(), writes
}

// replicaChangeCounts counts the spec.replicas changes seen so far of each workload, so that a
// phase's changes are those after it.
func (f *fixture) replicaChangeCounts(sets, deploys *recorder, statefulSets []string, deployment string) map[string]int {
	out := map[string]int{deployment: len(deploymentChanges(deploys.Events(f.t), deployment))}
	for _, name := range statefulSets {
		out[name] = len(statefulSetChanges(sets.Events(f.t), name))
	}
	return out
}

// waitMembersImage waits until every member of the fleet runs the image.
func (f *fixture) waitMembersImage(fleets []*v1alpha1.CelldFleet, name, img string) {
	f.t.Helper()
	for _, fl := range fleets {
		if fl.Name != name {
			continue
		}
		deadline := time.Now().Add(converge)
		for {
			stale := 0
			for _, p := range f.members(fl) {
				if p.Spec.Containers[0].Image != img || p.DeletionTimestamp != nil {
					stale++
				}
			}
			if stale == 0 {
				return
			}
			if time.Now().After(deadline) {
				f.t.Fatalf("%s: %d members not on image %s after %s", name, stale, img, converge)
			}
			time.Sleep(poll)
		}
	}
}

// deletedPodsByFleet lists, by fleet name, the names of the fleet's Pods whose deletion the
// events show, sorted.
func deletedPodsByFleet(evs []seen, fleets []*v1alpha1.CelldFleet) map[string][]string {
	byUID := map[string]string{}
	for _, fl := range fleets {
		byUID[string(fl.UID)] = fl.Name
	}
	owner := map[string]string{}
	for _, e := range evs {
		if p, ok := e.Obj.(*corev1.Pod); ok {
			owner[string(p.UID)] = byUID[p.Labels[kinds.LabelFleetUID]]
		}
	}
	out := map[string][]string{}
	for uid, d := range deletions(evs) {
		fleet := owner[string(uid)]
		out[fleet] = append(out[fleet], d.name)
	}
	for _, l := range out {
		sort.Strings(l)
	}
	return out
}

func formatChanges(changes []replicaChange) string {
	var steps []string
	for _, c := range changes {
		steps = append(steps, fmt.Sprintf("%d->%d", c.from, c.to))
	}
	return "[" + strings.Join(steps, ", ") + "]"
}

// --- Deployments, as the StatefulSet helpers of framework_test.go do for StatefulSets -----------

func (f *fixture) deploymentRecorder() *recorder {
	c := suite.kube.AppsV1().Deployments(f.ns)
	return f.record("deployments", func(ctx context.Context) (runtime.Object, error) { return c.List(ctx, metav1.ListOptions{}) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return c.Watch(ctx, o) })
}

type deploymentChange struct {
	from, to int32
	before   *appsv1.Deployment
}

func deploymentChanges(evs []seen, name string) []deploymentChange {
	var out []deploymentChange
	var prev *appsv1.Deployment
	for _, e := range evs {
		d, ok := e.Obj.(*appsv1.Deployment)
		if !ok || d.Name != name || e.Type == watch.Deleted {
			continue
		}
		if prev != nil && *d.Spec.Replicas != *prev.Spec.Replicas {
			out = append(out, deploymentChange{from: *prev.Spec.Replicas, to: *d.Spec.Replicas, before: prev})
		}
		prev = d
	}
	return out
}

// deploymentRolledOut: every replica of the requested size exists, is ready and on the current
// template, and no old one is left.
func deploymentRolledOut(d *appsv1.Deployment) bool {
	r := *d.Spec.Replicas
	return d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == r &&
		d.Status.ReadyReplicas == r && d.Status.UpdatedReplicas == r && d.Status.AvailableReplicas == r
}

func deploymentRolledOutAt(name string, replicas int32) func([]seen) bool {
	return func(evs []seen) bool {
		for i := len(evs) - 1; i >= 0; i-- {
			if d, ok := evs[i].Obj.(*appsv1.Deployment); ok && d.Name == name {
				return evs[i].Type != watch.Deleted && *d.Spec.Replicas == replicas && deploymentRolledOut(d)
			}
		}
		return false
	}
}

func checkOneStepShrinkDeployment(t *testing.T, changes []deploymentChange, from, to int32) {
	t.Helper()
	steps := make([]shrinkStep, len(changes))
	for i, c := range changes {
		steps[i] = shrinkStep{from: c.from, to: c.to, rolledOut: deploymentRolledOut(c.before),
			before: fmt.Sprintf("generation %d, status %+v", c.before.Generation, c.before.Status)}
	}
	checkShrinkSteps(t, "deployment spec.replicas", steps, from, to)
}
