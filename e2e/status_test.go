package e2e

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/testenv"
)

// TestStatusRebuilt: a status wiped by hand is rebuilt from observation alone, to what it was,
// and nothing else is written.
func TestStatusRebuilt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.startOperator()
	fl := f.create(f.newFleet("wiped", v1alpha1.ProfilePersistentFleet, 3))
	before := f.waitConverged(fl.Name)
	objects := f.snapshot()
	_, writes := op.writes(t)

	wiped, err := f.fleets().Patch(f.ctx, fl.Name, types.MergePatchType, []byte(`{"status":null}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatalf("clear status: %v", err)
	}
	if wiped.Status.State != "" || len(wiped.Status.Conditions) != 0 {
		t.Fatalf("status not cleared: %+v", wiped.Status)
	}
	after := f.waitFleet(fl.Name, time.Minute, "status rebuilt", func(cur *v1alpha1.CelldFleet) bool {
		return cur.ResourceVersion != wiped.ResourceVersion && converged(cur)
	})

	if got, want := comparable(after.Status), comparable(before.Status); !reflect.DeepEqual(got, want) {
		t.Errorf("rebuilt status differs:\nbefore:\n%s\nafter:\n%s", toYAML(want), toYAML(got))
	}
	if after.Generation != before.Generation || !reflect.DeepEqual(after.Spec, before.Spec) || !reflect.DeepEqual(after.Finalizers, before.Finalizers) {
		t.Errorf("fleet changed beyond its status: generation %d->%d, finalizers %v->%v", before.Generation, after.Generation, before.Finalizers, after.Finalizers)
	}
	if changed := diff(objects, f.snapshot()); len(changed) > 0 {
		t.Errorf("objects changed while the status was rebuilt: %s", strings.Join(changed, ", "))
	}
	_, now := op.writes(t)
	for series, n := range now {
		if n != writes[series] && !strings.Contains(series, `resource="celldfleets/status"`) && !strings.Contains(series, `resource="events"`) {
			t.Errorf("writes %s: %g -> %g; want only the fleet's status written", series, writes[series], n)
		}
	}
	t.Logf("writes while rebuilding:%s", formatSeries(testenv.Delta(now, writes)))
}

// comparable drops the condition transition times, which a status rebuilt from nothing cannot know.
func comparable(st v1alpha1.CelldFleetStatus) v1alpha1.CelldFleetStatus {
	st = *st.DeepCopy()
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	return st
}

// snapshot records the identity and version of every object of the namespace the operator writes
// or acts through.
func (f *fixture) snapshot() map[string]string {
	f.t.Helper()
	ctx, ns := f.ctx, f.ns
	lists := map[string]func(context.Context) (runtime.Object, error){
		"Service": func(ctx context.Context) (runtime.Object, error) {
			return suite.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		},
		"NetworkPolicy": func(ctx context.Context) (runtime.Object, error) {
			return suite.kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		},
		"PodDisruptionBudget": func(ctx context.Context) (runtime.Object, error) {
			return suite.kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		},
		"StatefulSet": func(ctx context.Context) (runtime.Object, error) {
			return suite.kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
		},
		"Deployment": func(ctx context.Context) (runtime.Object, error) {
			return suite.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		},
		"Pod": func(ctx context.Context) (runtime.Object, error) {
			return suite.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		},
		"PersistentVolumeClaim": func(ctx context.Context) (runtime.Object, error) {
			return suite.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		},
		"CelldReservation": func(ctx context.Context) (runtime.Object, error) {
			return suite.celld.CelldV1alpha1().CelldReservations(ns).List(ctx, metav1.ListOptions{})
		},
	}
	out := map[string]string{}
	for kind, list := range lists {
		l, err := list(ctx)
		if err != nil {
			f.t.Fatalf("list %s: %v", kind, err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, o := range items {
			m, _ := meta.Accessor(o)
			out[kind+"/"+m.GetName()] = fmt.Sprintf("uid %s rv %s", m.GetUID(), m.GetResourceVersion())
		}
	}
	return out
}

func diff(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, fmt.Sprintf("%s (%s -> %s)", k, v, orNone(b[k])))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("%s (new: %s)", k, v))
		}
	}
	sort.Strings(out)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "gone"
	}
	return s
}

// TestCapacityHistoryCleared: clearing the capacity history in the middle of a scale-in
// stabilization window does not let the fleet scale in any earlier than the window allowed.
func TestCapacityHistoryCleared(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startOperator()
	const window = 20 * time.Second
	fl := f.newFleet("history", v1alpha1.ProfileBucket, 4)
	fl.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	fl.Spec.Capacity.ScaleInStabilization = duration(window)
	fl = f.create(fl)
	f.waitConverged(fl.Name)
	sets := f.recordStatefulSets()

	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 3 })
	anchor := f.waitHistory(fl, "the scale-in request recorded", func(h []v1alpha1.CapacityDecision) bool {
		return len(h) > 0 && h[len(h)-1].Kind == v1alpha1.DecisionScaleInRequested && h[len(h)-1].To == 3
	}).Time.Time
	earliest := anchor.Add(window)
	t.Logf("scale-in to 3 requested at %s: the first member may go at %s", anchor.Format(time.RFC3339), earliest.Format(time.RFC3339))

	// Clear the history a third of the way into the window, as a person (or a restore that lost
	// the status) might.
	mid := anchor.Add(window / 3)
	if err := wait.PollUntilContextTimeout(f.ctx, poll, window, true, func(context.Context) (bool, error) {
		return !time.Now().Before(mid), nil
	}); err != nil {
		t.Fatal(err)
	}
	if s := f.statefulSet(fl.Name); *s.Spec.Replicas != 4 {
		t.Fatalf("scaled in to %d before the window ended", *s.Spec.Replicas)
	}
	r := f.reservation(fl)
	if _, err := suite.celld.CelldV1alpha1().CelldReservations(f.ns).Patch(f.ctx, r.Name, types.MergePatchType,
		[]byte(`{"status":{"capacityHistory":null}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("clear the capacity history: %v", err)
	}
	cleared := time.Now()
	t.Logf("capacity history cleared at %s (%s into the window)", cleared.Format(time.RFC3339), cleared.Sub(anchor).Round(100*time.Millisecond))

	f.waitConverged(fl.Name)
	changes := statefulSetChanges(sets.Await(t, "rolled out at 3", rolledOutAt(fl.Name, 3)), fl.Name)
	checkOneStepShrink(t, changes, 4, 3)
	if len(changes) > 0 {
		at := changes[0].at
		t.Logf("first member removed %s after the request (window %s; %s after the history was cleared)",
			at.Sub(anchor).Round(100*time.Millisecond), window, at.Sub(cleared).Round(100*time.Millisecond))
		if at.Before(earliest) {
			t.Errorf("scaled in at %s, %s before the window that began before the history was cleared ended", at.Format(time.RFC3339Nano), earliest.Sub(at))
		}
	}
	h := f.reservation(fl).Status.CapacityHistory
	t.Logf("history now: %s", formatHistory(h))
}

// waitHistory waits until the fleet's capacity history satisfies ok and returns its newest entry.
func (f *fixture) waitHistory(fl *v1alpha1.CelldFleet, what string, ok func([]v1alpha1.CapacityDecision) bool) v1alpha1.CapacityDecision {
	f.t.Helper()
	var last []v1alpha1.CapacityDecision
	err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		r, err := suite.celld.CelldV1alpha1().CelldReservations(f.ns).Get(ctx, reservationName(fl.Spec.Bucket), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = r.Status.CapacityHistory
		return ok(last), nil
	})
	if err != nil {
		f.t.Fatalf("capacity history of %s: %s: not within a minute; last: %s", fl.Name, what, formatHistory(last))
	}
	return last[len(last)-1]
}

func formatHistory(h []v1alpha1.CapacityDecision) string {
	var out []string
	for _, d := range h {
		out = append(out, fmt.Sprintf("%s %s %d->%d", d.Time.Format(time.TimeOnly), d.Kind, d.From, d.To))
	}
	return strings.Join(out, ", ")
}
