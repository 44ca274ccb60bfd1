package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestDegradedInput: what admission cannot see (a ServiceAccount or StorageClass that does not
// exist) is reported as Degraded with a reason, and nothing destructive follows: the last good
// workload keeps running untouched until the input is fixed.
func TestDegradedInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startOperator()
	degraded := func(reason string) func(*v1alpha1.CelldFleet) bool {
		return func(fl *v1alpha1.CelldFleet) bool {
			c := condition(fl, v1alpha1.ConditionDegraded)
			return fl.Status.ObservedGeneration == fl.Generation && c.Status == metav1.ConditionTrue && c.Reason == reason
		}
	}

	running := f.create(f.newFleet("running", v1alpha1.ProfileBucket, 2))
	f.waitConverged(running.Name)
	before, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, running.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := f.recordPods()
	f.update(running.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.ServiceAccountName = "celld-runtime" })
	fl := f.waitFleet(running.Name, time.Minute, "Degraded, reason ServiceAccountMissing", degraded("ServiceAccountMissing"))
	t.Logf("degraded: %s (Ready=%s)", condition(fl, v1alpha1.ConditionDegraded).Message, condition(fl, v1alpha1.ConditionReady).Status)
	after, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, running.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation || after.Spec.Template.Spec.ServiceAccountName != before.Spec.Template.Spec.ServiceAccountName {
		t.Errorf("the workload changed while its input was bad: generation %d->%d, serviceAccountName %q->%q",
			before.Generation, after.Generation, before.Spec.Template.Spec.ServiceAccountName, after.Spec.Template.Spec.ServiceAccountName)
	}
	if dels := deletions(pods.events(t)); len(dels) != 0 {
		t.Errorf("members deleted while the input was bad: %v", names(dels))
	}
	if fl.Status.Members.Ready != 2 {
		t.Errorf("ready members %d; want the last good workload's 2 still ready", fl.Status.Members.Ready)
	}

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "celld-runtime"}}
	if _, err := suite.kube.CoreV1().ServiceAccounts(f.ns).Create(f.ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFleet(running.Name, converge, "rolled out to the new ServiceAccount", func(fl *v1alpha1.CelldFleet) bool {
		if !converged(fl) || condition(fl, v1alpha1.ConditionDegraded).Status != metav1.ConditionFalse {
			return false
		}
		l, err := suite.kube.CoreV1().Pods(f.ns).List(f.ctx, metav1.ListOptions{LabelSelector: memberSelector(fl)})
		if err != nil || len(l.Items) != 2 {
			return false
		}
		for _, p := range l.Items {
			if p.Spec.ServiceAccountName != "celld-runtime" || !podReady(&p) {
				return false
			}
		}
		return true
	})

	noClass := f.newFleet("no-class", v1alpha1.ProfilePersistentFleet, 2)
	noClass.Spec.Storage.StorageClassName = "no-such-class"
	noClass = f.create(noClass)
	fl = f.waitFleet(noClass.Name, time.Minute, "Degraded, reason StorageClassMissing", degraded("StorageClassMissing"))
	t.Logf("degraded: %s", condition(fl, v1alpha1.ConditionDegraded).Message)
	if _, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, noClass.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("statefulset of a fleet without a storage class: %v; want none", err)
	}
}
