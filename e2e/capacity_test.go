package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/machine"
)

// The capacity tests drive the members' usage through kwok: the CPU and memory kwok's fake
// kubelets report for a Pod are its annotations (cluster/README.md), which metrics-server scrapes
// every 10s and serves as the metrics.k8s.io API the operator and the HPA read.
const (
	usageCPU    = "kwok.x-k8s.io/usage-cpu"
	usageMemory = "kwok.x-k8s.io/usage-memory"
	// capacityInterval is how often the tests' operators read usage.
	capacityInterval = "--capacity-interval=2s"
	// observe bounds how long a usage change takes to reach a decision: two scrapes (a CPU rate
	// needs two samples), the metrics API, and the operator's read.
	observe = 90 * time.Second
)

// setUsage makes kwok report cpu (and memory when not empty) for every current member of the fleet.
func (f *fixture) setUsage(fl *v1alpha1.CelldFleet, cpu, memory string) []corev1.Pod {
	f.t.Helper()
	pods := f.members(fl)
	ann := map[string]string{usageCPU: cpu}
	if memory != "" {
		ann[usageMemory] = memory
	}
	patch := mustJSON(f.t, map[string]any{"metadata": map[string]any{"annotations": ann}})
	for _, p := range pods {
		_, err := suite.kube.CoreV1().Pods(f.ns).Patch(f.ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			f.t.Fatalf("set usage of member %s: %v", p.Name, err)
		}
	}
	f.t.Logf("members %s use %s CPU", memberNames(pods), cpu)
	return pods
}

func memberNames(pods []corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return strings.Join(out, ",")
}

// history is the fleet's capacity history as its reservation records it.
func (f *fixture) history(fl *v1alpha1.CelldFleet) []v1alpha1.CapacityDecision {
	f.t.Helper()
	return f.reservation(fl).Status.CapacityHistory
}

// decisions are the history's entries of one kind at or after since.
func decisions(h []v1alpha1.CapacityDecision, kind v1alpha1.DecisionKind, since time.Time) []v1alpha1.CapacityDecision {
	var out []v1alpha1.CapacityDecision
	for _, d := range h {
		if d.Kind == kind && !d.Time.Time.Before(since.Truncate(time.Second)) {
			out = append(out, d)
		}
	}
	return out
}

// waitDecision waits until the history holds a decision of kind at or after since, and returns it.
func (f *fixture) waitDecision(fl *v1alpha1.CelldFleet, kind v1alpha1.DecisionKind, since time.Time, timeout time.Duration) v1alpha1.CapacityDecision {
	f.t.Helper()
	var found []v1alpha1.CapacityDecision
	err := wait.PollUntilContextTimeout(f.ctx, poll, timeout, true, func(context.Context) (bool, error) {
		found = decisions(f.history(fl), kind, since)
		return len(found) > 0, nil
	})
	if err != nil {
		f.t.Fatalf("fleet %s: no %s in the capacity history within %s: %s", fl.Name, kind, timeout, formatHistory(f.history(fl)))
	}
	return found[0]
}

// steadyAt: Steady with n members, all ready, whatever spec.members says (Auto sizes by usage).
func steadyAt(n int32) func(*v1alpha1.CelldFleet) bool {
	return func(fl *v1alpha1.CelldFleet) bool {
		st := &fl.Status
		return st.ObservedGeneration == fl.Generation && st.State == v1alpha1.StateSteady &&
			st.Members.Current == n && st.Members.Ready == n
	}
}

func recommends(n int32) func(*v1alpha1.CelldFleet) bool {
	return func(fl *v1alpha1.CelldFleet) bool {
		return fl.Status.RecommendedMembers != nil && *fl.Status.RecommendedMembers == n
	}
}

func i32p(n int32) *int32 { return &n }

// capacityFleet is a fleet whose capacity follows usage: members on an ordered StatefulSet (so
// each change of its size is recorded), 100m CPU requested each.
func (f *fixture) capacityFleet(name string, mode v1alpha1.CapacityMode, members, lo, hi int32, window time.Duration) *v1alpha1.CelldFleet {
	fl := f.newFleet(name, v1alpha1.ProfileBucket, members)
	fl.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	fl.Spec.Capacity = v1alpha1.CapacitySpec{
		Mode: mode, MinMembers: i32p(lo), MaxMembers: i32p(hi), TargetUtilization: 50,
		ScaleInStabilization: duration(window),
	}
	return fl
}

// TestKubectlTopShowsMemberUsage: the local control plane has a metrics pipeline. A member's usage
// set through kwok shows in `kubectl top pods` a scrape or two later.
func TestKubectlTopShowsMemberUsage(t *testing.T) {
	f := newFixture(t)
	f.startOperator()
	fl := f.create(f.newFleet("top", v1alpha1.ProfileBucket, 2))
	fl = f.waitConverged(fl.Name)
	start := time.Now()
	f.setUsage(fl, "70m", "200Mi")
	out := f.waitTop(fl, 65, 75, "200Mi")
	t.Logf("kubectl top pods showed the members' usage after %s:\n%s", time.Since(start).Round(time.Second), out)
}

// waitTop waits until `kubectl top pods` shows every member of the fleet using between lo and hi
// millicores (and memory, when given), and returns what it printed.
func (f *fixture) waitTop(fl *v1alpha1.CelldFleet, lo, hi int, memory ...string) string {
	f.t.Helper()
	members := f.members(fl)
	var out string
	err := wait.PollUntilContextTimeout(f.ctx, time.Second, observe, true, func(ctx context.Context) (bool, error) {
		o, err := kubectlCmd(ctx, "top", "pods", "--namespace", f.ns, "--selector", memberSelector(fl), "--no-headers")
		if err != nil {
			return false, nil
		}
		out = o
		shown := map[string]bool{}
		for _, line := range strings.Split(o, "\n") {
			fields := strings.Fields(line)
			var milli int
			if len(fields) != 3 {
				continue
			}
			if _, err := fmt.Sscanf(fields[1], "%dm", &milli); err == nil && milli >= lo && milli <= hi &&
				(len(memory) == 0 || fields[2] == memory[0]) {
				shown[fields[0]] = true
			}
		}
		for _, m := range members {
			if !shown[m.Name] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		f.t.Fatalf("kubectl top pods: members %s at %d-%dm CPU %v not shown within %s; last output:\n%s", memberNames(members), lo, hi, memory, observe, out)
	}
	return out
}

// TestRecommendFollowsUsage: with capacity mode Recommend, status.recommendedMembers follows the
// members' usage up and down against targetUtilization, and the fleet's size never changes.
func TestRecommendFollowsUsage(t *testing.T) {
	f := newFixture(t)
	judge := f.watchContract()
	f.startOperator(capacityInterval)
	fl := f.create(f.capacityFleet("recommend", v1alpha1.CapacityRecommend, 3, 1, 8, 0))
	fl = f.waitConverged(fl.Name)
	sets := f.recordStatefulSets()

	// 90% of the request on 3 members against a 50% target: ceil(270/50) = 6.
	start := time.Now()
	f.setUsage(fl, "90m", "")
	fl = f.waitFleet(fl.Name, observe, "recommends 6 members", recommends(6))
	t.Logf("recommended 6 after %s: %s", time.Since(start).Round(time.Second), condition(fl, machine.ConditionCapacityObserved).Message)

	// 10% on 3: ceil(30/50) = 1, minMembers 1.
	start = time.Now()
	f.setUsage(fl, "10m", "")
	fl = f.waitFleet(fl.Name, observe, "recommends 1 member", recommends(1))
	t.Logf("recommended 1 after %s: %s", time.Since(start).Round(time.Second), condition(fl, machine.ConditionCapacityObserved).Message)

	if c := condition(fl, machine.ConditionCapacityObserved); c.Status != metav1.ConditionTrue {
		t.Errorf("CapacityObserved: want True, got %s %s: %s", c.Status, c.Reason, c.Message)
	}
	if fl.Spec.Members != 3 || fl.Status.Members.Current != 3 || len(f.members(fl)) != 3 {
		t.Errorf("Recommend resized the fleet: spec.members %d, status.members.current %d, %d members",
			fl.Spec.Members, fl.Status.Members.Current, len(f.members(fl)))
	}
	if changes := statefulSetChanges(sets.Events(t), fl.Name); len(changes) != 0 {
		t.Errorf("Recommend changed the workload's replicas: %+v", changes)
	}
	judge.Verify(t)
}

// TestAutoGrowsInOneWriteShrinksOneAtATime: with capacity mode Auto, a usage spike grows the fleet
// to the recommendation in one write; low usage shrinks it one member per step, the first only
// once the request stood for scaleInStabilization as the reservation's history records it, and
// never below minMembers, which the CapacityObserved condition and the metrics then name.
func TestAutoGrowsInOneWriteShrinksOneAtATime(t *testing.T) {
	const window = 20 * time.Second
	f := newFixture(t)
	judge := f.watchContract()
	op := f.startOperator(capacityInterval)
	fl := f.create(f.capacityFleet("auto", v1alpha1.CapacityAuto, 2, 2, 6, window))
	fl = f.waitConverged(fl.Name)
	sets, fleets := f.recordStatefulSets(), f.recordFleets()

	// 99% on 2 members: ceil(198/50) = 4; the 2 new members at kwok's default 1m keep it at 4.
	start := time.Now()
	f.setUsage(fl, "99m", "")
	fl = f.waitFleet(fl.Name, observe+converge, "grown to 4 and steady", steadyAt(4))
	grow := statefulSetChanges(sets.Await(t, "rolled out at 4", rolledOutAt(fl.Name, 4)), fl.Name)
	if len(grow) != 1 || grow[0].from != 2 || grow[0].to != 4 {
		t.Fatalf("grow on a usage spike: want one change 2->4 of spec.replicas, got %+v", grow)
	}
	t.Logf("grew 2->4 in one write %s after the spike", time.Since(start).Round(time.Second))

	// 10% on 4: ceil(40/50) = 1, held at minMembers 2.
	start = time.Now()
	f.setUsage(fl, "10m", "")
	asked := f.waitDecision(fl, v1alpha1.DecisionScaleInRequested, start, observe)
	fl = f.waitFleet(fl.Name, window+2*converge, "shrunk to 2 and steady", steadyAt(2))
	changes := statefulSetChanges(sets.Await(t, "rolled out at 2", rolledOutAt(fl.Name, 2)), fl.Name)[1:]
	checkOneStepShrink(t, changes, 4, 2)
	first := f.waitDecision(fl, v1alpha1.DecisionShrinkOne, asked.Time.Time, time.Second)
	if waited := first.Time.Sub(asked.Time.Time); waited < window {
		t.Errorf("the first member went %s after the scale-in was asked for, before scaleInStabilization %s: %s",
			waited, window, formatHistory(f.history(fl)))
	}
	t.Logf("shrank 4->2 one member per step %s after usage fell; history: %s", time.Since(start).Round(time.Second), formatHistory(f.history(fl)))

	held := false
	for _, e := range fleets.Events(t) {
		if x, ok := e.Obj.(*v1alpha1.CelldFleet); ok && condition(x, machine.ConditionCapacityObserved).Reason == machine.ReasonScaleInStabilization {
			held = true
			t.Logf("while the window ran: %s", condition(x, machine.ConditionCapacityObserved).Message)
			break
		}
	}
	if !held {
		t.Errorf("no version of the fleet said the scale-in waited for stabilization (CapacityObserved reason %s)", machine.ReasonScaleInStabilization)
	}

	// Usage still asks for 1: the fleet stays at minMembers, and says so.
	fl = f.waitFleet(fl.Name, observe, "says minMembers holds it", func(fl *v1alpha1.CelldFleet) bool {
		return condition(fl, machine.ConditionCapacityObserved).Reason == machine.ReasonMinMembers
	})
	time.Sleep(5 * time.Second)
	if fl = f.waitFleet(fl.Name, time.Second, "still at 2", steadyAt(2)); len(f.members(fl)) != 2 {
		t.Errorf("below minMembers: %d members", len(f.members(fl)))
	}
	if _, s := op.counter(t, "celld_operator_capacity_scale_in_held"); s[fmt.Sprintf(`{fleet="%s",namespace="%s",reason="MinMembers"}`, fl.Name, f.ns)] != 1 {
		t.Errorf("celld_operator_capacity_scale_in_held: want MinMembers 1 for the fleet, got %s", formatSeries(s))
	}
	if _, s := op.counter(t, "celld_operator_capacity_recommended_members"); s[fmt.Sprintf(`{fleet="%s",namespace="%s"}`, fl.Name, f.ns)] != 2 {
		t.Errorf("celld_operator_capacity_recommended_members: want 2 for the fleet, got %s", formatSeries(s))
	}
	// metrics-server's CPU rate is taken between two scrapes of kwok's counter: a point or so off.
	if _, s := op.counter(t, "celld_operator_capacity_utilization_percent"); s[fmt.Sprintf(`{fleet="%s",namespace="%s"}`, fl.Name, f.ns)] < 8 ||
		s[fmt.Sprintf(`{fleet="%s",namespace="%s"}`, fl.Name, f.ns)] > 12 {
		t.Errorf("celld_operator_capacity_utilization_percent: want 10 (+-2) for the fleet, got %s", formatSeries(s))
	}
	judge.Verify(t)
}

// TestAutoScaleInWindowSurvivesOperatorKill: an operator killed in the middle of a scale-in's
// stabilization window neither skips nor restarts it: the one that follows finds the request in
// the reservation's history and removes the first member when the window that began there ends.
func TestAutoScaleInWindowSurvivesOperatorKill(t *testing.T) {
	const window = 45 * time.Second
	f := newFixture(t)
	judge := f.watchContract()
	op := f.startOperator(capacityInterval)
	// Manual until the metrics show the usage it starts from: a scale-in request recorded on the
	// way (kwok's default usage asks for minMembers) would stand in the history and start the
	// window early.
	fl := f.create(f.capacityFleet("window", v1alpha1.CapacityManual, 3, 2, 6, window))
	fl = f.waitConverged(fl.Name)
	// 40% on 3 members: ceil(120/50) = 3, the size it has. Falling to 10%, usage asks for 2
	// (minMembers) from 33% down, so every sample on the way asks for the same scale-in.
	f.setUsage(fl, "40m", "")
	f.waitTop(fl, 35, 45)
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Capacity.Mode = v1alpha1.CapacityAuto })
	f.waitFleet(fl.Name, observe, "recommends 3 members", recommends(3))
	sets := f.recordStatefulSets()

	start := time.Now()
	f.setUsage(fl, "10m", "")
	asked := f.waitDecision(fl, v1alpha1.DecisionScaleInRequested, start, observe)
	time.Sleep(time.Until(asked.Time.Add(window / 3)))
	op.kill()
	killed := time.Now()
	f.startOperator(capacityInterval)
	t.Logf("operator killed %s into the window, another started", killed.Sub(asked.Time.Time).Round(time.Second))

	first := f.waitDecision(fl, v1alpha1.DecisionShrinkOne, asked.Time.Time, window+converge)
	waited := first.Time.Sub(asked.Time.Time)
	t.Logf("first member removed %s after the request; history: %s", waited, formatHistory(f.history(fl)))
	if waited < window {
		t.Errorf("the window was skipped: first member removed %s after the request, scaleInStabilization %s", waited, window)
	}
	if restarted := killed.Add(window); !first.Time.Time.Before(restarted.Truncate(time.Second)) {
		t.Errorf("the window was restarted: first member removed at %s, at or after the kill plus the window (%s)",
			first.Time.Format(time.TimeOnly), restarted.Format(time.TimeOnly))
	}
	if n := len(decisions(f.history(fl), v1alpha1.DecisionScaleInRequested, start)); n != 1 {
		t.Errorf("want the one scale-in request the first operator recorded, got %d: %s", n, formatHistory(f.history(fl)))
	}
	fl = f.waitFleet(fl.Name, converge, "shrunk to 2 and steady", steadyAt(2))
	changes := statefulSetChanges(sets.Await(t, "rolled out at 2", rolledOutAt(fl.Name, 2)), fl.Name)
	checkOneStepShrink(t, changes, 3, 2)
	judge.Verify(t)
}

// TestMetricsServerStoppedNoScaleIn: metrics-server stops while a scale-in waits out its window
// (an Auto fleet of 4 whose members use kwok's default 1m of their 100m: usage asks for minMembers 2).
// The operator observes nothing: it says so (CapacityObserved=False, naming the metrics API and
// metrics-server) and decides nothing, so the window ends without a member removed, though the
// last usage it read asked for fewer. Started again, the pipeline decides again: the request still
// stands and the fleet shrinks one member per step.
//
// Not parallel: it stops the suite's metrics-server (cluster/stop.sh), which every fleet and the
// HPA read.
func TestMetricsServerStoppedNoScaleIn(t *testing.T) {
	const window = 20 * time.Second
	f := newFixture(t)
	judge := f.watchContract()
	op := f.startOperator(capacityInterval)
	sets := f.recordStatefulSets()
	start := time.Now()
	fl := f.create(f.capacityFleet("nometrics", v1alpha1.CapacityAuto, 4, 2, 6, window))
	fl = f.waitConverged(fl.Name)
	asked := f.waitDecision(fl, v1alpha1.DecisionScaleInRequested, start, observe)

	if _, err := suite.cp.Script("stop.sh", "metrics-server"); err != nil {
		t.Fatalf("cluster/stop.sh metrics-server: %v", err)
	}
	stopped := time.Now()
	restarted := false
	restart := func() {
		if restarted {
			return
		}
		restarted = true
		if _, err := suite.cp.Script("up.sh"); err != nil {
			t.Fatalf("cluster/up.sh (metrics-server back): %v", err)
		}
	}
	t.Cleanup(restart)
	t.Logf("metrics-server stopped %s into the window", stopped.Sub(asked.Time.Time).Round(time.Second))

	fl = f.waitFleet(fl.Name, observe, "says capacity is not observed", func(fl *v1alpha1.CelldFleet) bool {
		c := condition(fl, machine.ConditionCapacityObserved)
		return c.Status == metav1.ConditionFalse && c.Reason == machine.ReasonMetricsUnavailable
	})
	c := condition(fl, machine.ConditionCapacityObserved)
	t.Logf("%s after the stop: CapacityObserved=%s %s: %s", time.Since(stopped).Round(time.Second), c.Status, c.Reason, c.Message)
	if !strings.Contains(c.Message, "metrics.k8s.io") || !strings.Contains(c.Message, "metrics-server") {
		t.Errorf("CapacityObserved message should name the metrics API and metrics-server: %q", c.Message)
	}
	if _, s := op.counter(t, "celld_operator_capacity_observed"); s[fmt.Sprintf(`{fleet="%s",namespace="%s"}`, fl.Name, f.ns)] != 0 {
		t.Errorf("celld_operator_capacity_observed: want 0 for the fleet, got %s", formatSeries(s))
	}

	// Past the window, and then some: no member removed, no decision recorded.
	time.Sleep(time.Until(asked.Time.Add(window + 10*time.Second)))
	if shrunk := decisions(f.history(fl), v1alpha1.DecisionShrinkOne, start); len(shrunk) != 0 {
		t.Errorf("a member was removed while capacity was not observed: %s", formatHistory(f.history(fl)))
	}
	if changes := statefulSetChanges(sets.Events(t), fl.Name); len(changes) != 0 {
		t.Errorf("the workload was resized while capacity was not observed: %+v", changes)
	}
	if fl = f.waitFleet(fl.Name, time.Second, "still at 4", steadyAt(4)); len(f.members(fl)) != 4 {
		t.Errorf("want 4 members while capacity is not observed, got %d", len(f.members(fl)))
	}

	restart()
	back := time.Now()
	f.waitFleet(fl.Name, observe, "observes capacity again", func(fl *v1alpha1.CelldFleet) bool {
		return condition(fl, machine.ConditionCapacityObserved).Status == metav1.ConditionTrue
	})
	fl = f.waitFleet(fl.Name, observe+2*converge, "shrunk to 2 and steady", steadyAt(2))
	changes := statefulSetChanges(sets.Await(t, "rolled out at 2", rolledOutAt(fl.Name, 2)), fl.Name)
	checkOneStepShrink(t, changes, 4, 2)
	t.Logf("metrics back: shrank 4->2 one member per step %s later; history: %s", time.Since(back).Round(time.Second), formatHistory(f.history(fl)))
	judge.Verify(t)
}

// TestHPADrivesFleetThroughScaleSubresource: an autoscaling/v2 HorizontalPodAutoscaler targets a
// CelldFleet through its scale subresource. High usage makes the HPA raise spec.members, and the
// fleet grows in one write; low usage makes it lower spec.members by two, and the fleet shrinks one
// member per step: the HPA's request is a manual request like any other.
func TestHPADrivesFleetThroughScaleSubresource(t *testing.T) {
	f := newFixture(t)
	judge := f.watchContract()
	f.startOperator()
	fl := f.newFleet("hpa", v1alpha1.ProfileBucket, 2)
	fl.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	fl.Spec.Capacity.ScaleInStabilization = duration(0)
	fl = f.create(fl)
	fl = f.waitConverged(fl.Name)
	sets := f.recordStatefulSets()

	zero := int32(0)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: fl.Name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "CelldFleet", Name: fl.Name},
			MinReplicas:    i32p(2),
			MaxReplicas:    4,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{
					Type: autoscalingv2.UtilizationMetricType, AverageUtilization: i32p(50),
				}},
			}},
			// The HPA's own windows are not what is tested: the fleet's policy is.
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &zero},
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &zero},
			},
		},
	}
	if _, err := suite.kube.AutoscalingV2().HorizontalPodAutoscalers(f.ns).Create(f.ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create HorizontalPodAutoscaler: %v", err)
	}

	// 100% on 2 members against a 50% target: the HPA asks for 4.
	start := time.Now()
	f.setUsage(fl, "100m", "")
	fl = f.waitFleet(fl.Name, observe+converge, "scaled to 4 by the HPA", func(fl *v1alpha1.CelldFleet) bool {
		return fl.Spec.Members == 4 && converged(fl)
	})
	grow := statefulSetChanges(sets.Await(t, "rolled out at 4", rolledOutAt(fl.Name, 4)), fl.Name)
	if len(grow) != 1 || grow[0].from != 2 || grow[0].to != 4 {
		t.Fatalf("HPA scale-up: want one change 2->4 of spec.replicas, got %+v", grow)
	}
	scaled := false
	for _, m := range fl.ManagedFields {
		if m.Subresource == "scale" {
			scaled = true
			t.Logf("spec.members written through the scale subresource by %s", m.Manager)
		}
	}
	if !scaled {
		t.Errorf("no write through the scale subresource in the fleet's managedFields")
	}
	t.Logf("HPA grew the fleet 2->4 in one write %s after the spike", time.Since(start).Round(time.Second))

	// 10% on 4: the HPA asks for 1, held at its minReplicas 2.
	start = time.Now()
	f.setUsage(fl, "10m", "")
	fl = f.waitFleet(fl.Name, observe+2*converge, "scaled to 2 by the HPA", func(fl *v1alpha1.CelldFleet) bool {
		return fl.Spec.Members == 2 && converged(fl)
	})
	changes := statefulSetChanges(sets.Await(t, "rolled out at 2", rolledOutAt(fl.Name, 2)), fl.Name)[1:]
	checkOneStepShrink(t, changes, 4, 2)
	t.Logf("HPA shrank the fleet 4->2, one member per step, %s after usage fell", time.Since(start).Round(time.Second))
	if h, err := suite.kube.AutoscalingV2().HorizontalPodAutoscalers(f.ns).Get(f.ctx, hpa.Name, metav1.GetOptions{}); err == nil {
		t.Logf("HPA status: current %d desired %d", h.Status.CurrentReplicas, h.Status.DesiredReplicas)
	}
	judge.Verify(t)
}
