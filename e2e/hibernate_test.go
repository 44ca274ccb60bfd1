package e2e

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// checkAsleep: no workload and no member Pod, the claims and the reservation as they were, and
// the status says the fleet sleeps.
func (f *fixture) checkAsleep(what string, fl *v1alpha1.CelldFleet, claims map[types.UID]string, res types.UID) {
	f.t.Helper()
	if _, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		f.t.Fatalf("%s: the StatefulSet is there (%v)", what, err)
	}
	if pods := f.members(fl); len(pods) != 0 {
		f.t.Fatalf("%s: %d member Pods left", what, len(pods))
	}
	if got := f.claimsOf(fl); !maps.Equal(got, claims) {
		f.t.Fatalf("%s: claims %v, want the ones kept %v", what, got, claims)
	}
	if r := f.reservation(fl); r.UID != res || r.Spec.FleetUID != fl.UID {
		f.t.Fatalf("%s: reservation %s bound to %s, want %s bound to %s", what, r.UID, r.Spec.FleetUID, res, fl.UID)
	}
	got, err := f.fleets().Get(f.ctx, fl.Name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	if got.Status.State != v1alpha1.StateHibernated || got.Spec.Members != 3 || got.Status.Members.Desired != 3 || got.Status.Members.Current != 0 {
		f.t.Fatalf("%s: state %s, spec.members %d, status.members %+v; want Hibernated, 3, desired 3 current 0", what, got.Status.State, got.Spec.Members, got.Status.Members)
	}
	if c := condition(got, v1alpha1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != "Hibernated" {
		f.t.Fatalf("%s: Ready %s %s, want False Hibernated", what, c.Status, c.Reason)
	}
	if c := condition(got, v1alpha1.ConditionHibernated); c.Status != metav1.ConditionTrue {
		f.t.Fatalf("%s: Hibernated %s, want True", what, c.Status)
	}
}

// TestHibernation: a PersistentFleet of three hibernated with kubectl celld hibernate stops
// every member at once (its StatefulSet deleted, the garbage collector stopping the Pods) and
// keeps its claims and reservation; an operator restart while it sleeps changes nothing; a
// write of spec.members and an HPA that targets it move nothing; woken, it is back at three
// members on the same claims (by UID), Ready once every member is; asleep again, it is deleted
// through the finalizer path. Judged from the API server, every write by the contract's judge.
func TestHibernation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	judge := f.watchContract()
	op := f.startOperator()
	fl := f.create(f.newFleet("sleepy", v1alpha1.ProfilePersistentFleet, 3))
	fl = f.waitConverged(fl.Name)
	claims := f.claimsOf(fl)
	res := f.reservation(fl).UID
	if len(claims) != 3 {
		t.Fatalf("claims %v, want 3", claims)
	}
	pods := f.recordPods()

	out, stderr, err := f.kubectlCelld("hibernate", fl.Name, "-n", f.ns)
	if err != nil || !strings.Contains(out, "hibernating") {
		t.Fatalf("kubectl celld hibernate: %v %s\n%s", err, stderr, out)
	}
	f.waitFleet(fl.Name, converge, "hibernated", func(fl *v1alpha1.CelldFleet) bool {
		return fl.Status.State == v1alpha1.StateHibernated
	})
	f.checkAsleep("hibernated", fl, claims, res)
	// At once: the garbage collector asked every member to stop within moments of the first,
	// where an ordered scale-down waits for each member to be gone before the next (kwok takes a
	// terminating Pod away within seconds, so a spread of seconds would tell).
	var first, last time.Time
	terminating := map[types.UID]bool{}
	for _, e := range pods.Events(t) {
		p, ok := e.Obj.(*corev1.Pod)
		if !ok || terminating[p.UID] || (p.DeletionTimestamp == nil && e.Type != watch.Deleted) {
			continue
		}
		terminating[p.UID] = true
		if first.IsZero() {
			first = e.At
		}
		last = e.At
	}
	if len(terminating) != 3 || last.Sub(first) > 3*time.Second {
		t.Errorf("%d members stopped, %s from the first to the last; want all 3 at once", len(terminating), last.Sub(first))
	}
	t.Logf("3 members asked to stop within %s", last.Sub(first))
	for _, reason := range []string{"Hibernating", "Hibernated"} {
		if n := f.eventsOf(fl.Name, reason); n != 1 {
			t.Errorf("%d %s Events, want 1", n, reason)
		}
	}
	out, stderr, err = f.kubectlCelld("status", fl.Name, "-n", f.ns)
	if err != nil || !strings.Contains(out, "Hibernation:  ASLEEP") {
		t.Errorf("kubectl celld status: %v %s\n%s", err, stderr, out)
	}

	op.stop(t)
	f.startOperator()
	time.Sleep(5 * time.Second)
	f.checkAsleep("after an operator restart", fl, claims, res)

	// spec.members stays while the fleet sleeps: a write of it is refused, naming the field.
	cur, err := f.fleets().Get(f.ctx, fl.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Members = 5
	if _, err := f.fleets().Update(f.ctx, cur, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "spec.members cannot change while the fleet stays hibernated") {
		t.Fatalf("spec.members written on a sleeping fleet: %v, want a refusal", err)
	}
	// The scale subresource, as kubectl scale, HPA and KEDA write it: refused the same way.
	if out, err := kubectlCmd(f.ctx, "--namespace", f.ns, "scale", "celldfleet", fl.Name, "--replicas=5"); err == nil {
		t.Fatalf("kubectl scale of a sleeping fleet admitted: %s", out)
	}
	// An HPA whose minimum is above the fleet's size: it moves nothing while the fleet sleeps.
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: fl.Name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "CelldFleet", Name: fl.Name},
			MinReplicas:    i32p(5),
			MaxReplicas:    6,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{
					Type: autoscalingv2.UtilizationMetricType, AverageUtilization: i32p(50),
				}},
			}},
		},
	}
	if _, err := suite.kube.AutoscalingV2().HorizontalPodAutoscalers(f.ns).Create(f.ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create HorizontalPodAutoscaler: %v", err)
	}
	time.Sleep(20 * time.Second)
	f.checkAsleep("with an HPA asking for 5", fl, claims, res)
	if h, err := suite.kube.AutoscalingV2().HorizontalPodAutoscalers(f.ns).Get(f.ctx, hpa.Name, metav1.GetOptions{}); err == nil {
		for _, c := range h.Status.Conditions {
			t.Logf("HPA %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	if err := suite.kube.AutoscalingV2().HorizontalPodAutoscalers(f.ns).Delete(f.ctx, hpa.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	out, stderr, err = f.kubectlCelld("wake", fl.Name, "-n", f.ns)
	if err != nil || !strings.Contains(out, "waking") {
		t.Fatalf("kubectl celld wake: %v %s\n%s", err, stderr, out)
	}
	// Waking until every member is ready: never Ready with a member missing or not ready.
	err = wait.PollUntilContextTimeout(f.ctx, poll, converge, true, func(ctx context.Context) (bool, error) {
		got, err := f.fleets().Get(ctx, fl.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, p := range f.members(fl) {
			if p.DeletionTimestamp == nil && podReady(&p) {
				ready++
			}
		}
		if c := condition(got, v1alpha1.ConditionReady); c.Status == metav1.ConditionTrue && ready < 3 {
			t.Fatalf("woken: Ready=True with %d of 3 members ready", ready)
		}
		return converged(got), nil
	})
	if err != nil {
		t.Fatalf("woken: not converged within %s: %v", converge, err)
	}
	if got := f.claimsOf(fl); !maps.Equal(got, claims) {
		t.Fatalf("woken: claims %v, want the same %v", got, claims)
	}
	for _, p := range f.members(fl) {
		for _, v := range p.Spec.Volumes {
			if c := v.PersistentVolumeClaim; c != nil && c.ClaimName != "data-"+p.Name {
				t.Errorf("woken: %s mounts %s, want its own claim data-%s", p.Name, c.ClaimName, p.Name)
			}
		}
	}
	if s := f.statefulSet(fl.Name); *s.Spec.Replicas != 3 {
		t.Errorf("woken: StatefulSet at %d, want 3", *s.Spec.Replicas)
	}
	for _, reason := range []string{"Waking", "Woken"} {
		if n := f.eventsOf(fl.Name, reason); n != 1 {
			t.Errorf("%d %s Events, want 1", n, reason)
		}
	}

	// Asleep again, then deleted: the finalizer path with no member to stop.
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Hibernate = true })
	f.waitFleet(fl.Name, converge, "hibernated again", func(fl *v1alpha1.CelldFleet) bool {
		return fl.Status.State == v1alpha1.StateHibernated
	})
	f.deleteFleet(fl.Name, true)
	if got := f.claimsOf(fl); len(got) != 0 {
		t.Errorf("a PersistentFleet deleted while asleep left its claims %v", got)
	}
	if r := f.reservation(fl); r.UID != res {
		t.Errorf("the reservation was replaced (%s, was %s)", r.UID, res)
	}
	judge.Verify(t)
}
