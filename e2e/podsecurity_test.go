package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/api/v1alpha1"
)

const enforceLabel = "pod-security.kubernetes.io/enforce"

// TestPodSecurity: the tests' namespaces and deploy/'s celld-system enforce the restricted Pod
// Security Standard, which refuses a privileged or root Pod there (the negative control); celld's
// members of both profiles are admitted in such a namespace, and so are the operator's own Pods,
// from deploy/operator/deployment.yaml installed for real (kwok runs them; the image is never
// pulled).
func TestPodSecurity(t *testing.T) {
	t.Parallel()
	// The Deployment last: its cleanup runs first, so it never outlives this test.
	installDeploy(t, "namespace.yaml", "rbac/service_account.yaml", "operator/deployment.yaml")
	f := newFixture(t)
	f.startOperator()

	for _, ns := range []string{f.ns, operatorNamespace} {
		n, err := suite.kube.CoreV1().Namespaces().Get(f.ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Labels[enforceLabel]; got != "restricted" {
			t.Errorf("namespace %s: %s=%q; want restricted", ns, enforceLabel, got)
		}
		checkRestrictedEnforced(t, f.ctx, ns)
	}

	// celld's members, in the test's namespace.
	persistent := f.create(f.newFleet("persistent", v1alpha1.ProfilePersistentFleet, 2))
	bucket := f.create(f.newFleet("bucket", v1alpha1.ProfileBucket, 2))
	for _, fl := range []*v1alpha1.CelldFleet{persistent, bucket} {
		fl = f.waitConverged(fl.Name)
		pods := f.members(fl)
		if len(pods) != int(fl.Spec.Members) {
			t.Errorf("fleet %s: %d members; want %d", fl.Name, len(pods), fl.Spec.Members)
		}
		for i := range pods {
			if !podReady(&pods[i]) {
				t.Errorf("member %s not ready", pods[i].Name)
			}
		}
		t.Logf("%s fleet %s: %d members admitted in %s and ready", fl.Spec.Profile, fl.Name, len(pods), f.ns)
	}

	// The operator's Pods, in celld-system, from the manifest as shipped.
	rs, pods := awaitReplicaSetPods(t, f.ctx, operatorNamespace, "celld-operator", 2)
	for i := range pods {
		p := &pods[i]
		t.Logf("operator pod %s admitted in %s (phase %s, ready %v)", p.Name, operatorNamespace, p.Status.Phase, podReady(p))
	}
	if failed := failedCreates(t, f.ctx, operatorNamespace, rs.Name); len(failed) > 0 {
		t.Errorf("replicaset %s: FailedCreate events: %s", rs.Name, strings.Join(failed, "; "))
	}

	// Negative control of the same check: a Deployment whose Pods violate restricted gets a
	// ReplicaSet that creates none.
	violator := operatorLikeDeployment("violator")
	violator.Spec.Template.Spec.Containers[0].SecurityContext.Privileged = ptrTo(true)
	violator.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
	if _, err := suite.kube.AppsV1().Deployments(f.ns).Create(f.ctx, violator, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment %s: %v", violator.Name, err)
	}
	var refused *appsv1.ReplicaSet
	err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := suite.kube.AppsV1().ReplicaSets(f.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=violator"})
		if err != nil || len(l.Items) != 1 {
			return false, nil
		}
		refused = &l.Items[0]
		return replicaFailure(refused) != "", nil
	})
	if err != nil {
		t.Fatalf("the violating deployment's replicaset shows no failure within a minute: %s", toYAML(refused))
	}
	if msg := replicaFailure(refused); !strings.Contains(msg, `violates PodSecurity "restricted`) {
		t.Errorf("replicaset %s failure: %s; want a PodSecurity refusal", refused.Name, msg)
	} else {
		t.Logf("negative control: replicaset %s of a privileged deployment creates no Pod: %s", refused.Name, msg)
	}
	// The controller's events are recorded asynchronously.
	if err := wait.PollUntilContextTimeout(f.ctx, poll, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(failedCreates(t, f.ctx, f.ns, refused.Name)) > 0, nil
	}); err != nil {
		t.Errorf("replicaset %s: no FailedCreate event for the refused Pods within 30s", refused.Name)
	}
}

// checkRestrictedEnforced creates, as server-side dry runs, a privileged Pod and a root Pod in the
// namespace, which restricted must refuse, and a compliant one, which it must admit: the refusals
// are about the violations, not anything else.
func checkRestrictedEnforced(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	pod := func(name string, change func(*corev1.Container)) *corev1.Pod {
		d := operatorLikeDeployment(name)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: d.Spec.Template.Spec}
		change(&p.Spec.Containers[0])
		return p
	}
	cases := []struct {
		pod  *corev1.Pod
		want string // "" admitted, else a word of the refusal
	}{
		{pod("compliant", func(*corev1.Container) {}), ""},
		{pod("privileged", func(c *corev1.Container) {
			c.SecurityContext.Privileged = ptrTo(true)
			c.SecurityContext.AllowPrivilegeEscalation = nil
		}), "privileged"},
		{pod("root", func(c *corev1.Container) {
			c.SecurityContext.RunAsNonRoot = nil
			c.SecurityContext.RunAsUser = ptrTo(int64(0))
		}), "runAsUser=0"},
		{pod("capabilities", func(c *corev1.Container) { c.SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"} }), "NET_ADMIN"},
	}
	for _, c := range cases {
		_, err := suite.kube.CoreV1().Pods(ns).Create(ctx, c.pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("namespace %s: a compliant pod refused: %v", ns, err)
		case c.want == "":
		case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted`) || !strings.Contains(err.Error(), c.want):
			t.Errorf("namespace %s: %s pod: %v; want refused by PodSecurity restricted (%s)", ns, c.pod.Name, err, c.want)
		default:
			t.Logf("namespace %s refuses a %s pod: %v", ns, c.pod.Name, err)
		}
	}
}

// operatorLikeDeployment is a Deployment with the operator's Pod security settings, for the tests
// to break one setting at a time.
func operatorLikeDeployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptrTo(true), RunAsUser: ptrTo(int64(65532)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name: "c", Image: image,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptrTo(false), RunAsNonRoot: ptrTo(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// awaitReplicaSetPods waits until the Deployment's current ReplicaSet has created want Pods and
// they are ready, and returns them; it fails on a ReplicaSet that reports a failure to create.
func awaitReplicaSetPods(t *testing.T, ctx context.Context, ns, deployment string, want int) (*appsv1.ReplicaSet, []corev1.Pod) {
	t.Helper()
	var (
		rs   *appsv1.ReplicaSet
		pods []corev1.Pod
		last string
	)
	err := wait.PollUntilContextTimeout(ctx, poll, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := suite.kube.AppsV1().Deployments(ns).Get(ctx, deployment, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return false, err
		}
		sets, err := suite.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return false, nil
		}
		rs = nil
		for i := range sets.Items {
			s := &sets.Items[i]
			if ref := metav1.GetControllerOf(s); ref != nil && ref.UID == d.UID && s.Annotations["deployment.kubernetes.io/revision"] == d.Annotations["deployment.kubernetes.io/revision"] {
				rs = s
			}
		}
		if rs == nil {
			last = "no replicaset yet"
			return false, nil
		}
		if msg := replicaFailure(rs); msg != "" {
			return false, fmt.Errorf("replicaset %s cannot create its Pods: %s", rs.Name, msg)
		}
		l, err := suite.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return false, nil
		}
		pods = pods[:0]
		ready := 0
		for _, p := range l.Items {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == rs.UID {
				pods = append(pods, p)
				if podReady(&p) {
					ready++
				}
			}
		}
		last = fmt.Sprintf("replicaset %s: %d pods, %d ready", rs.Name, len(pods), ready)
		return len(pods) == want && ready == want, nil
	})
	if err != nil {
		t.Fatalf("deployment %s/%s: want %d ready pods: %v (last: %s)", ns, deployment, want, err, last)
	}
	return rs, pods
}

// replicaFailure is the message of a ReplicaSet's ReplicaFailure condition, "" without one.
func replicaFailure(rs *appsv1.ReplicaSet) string {
	for _, c := range rs.Status.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

// failedCreates lists the FailedCreate events of a ReplicaSet.
func failedCreates(t *testing.T, ctx context.Context, ns, rs string) []string {
	t.Helper()
	l, err := suite.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=ReplicaSet,involvedObject.name=" + rs + ",reason=FailedCreate",
	})
	if err != nil {
		t.Fatalf("events of replicaset %s: %v", rs, err)
	}
	var out []string
	for _, e := range l.Items {
		out = append(out, e.Message)
	}
	return out
}
