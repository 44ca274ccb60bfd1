package realnodes

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

const operatorSelector = "app.kubernetes.io/name=celld-operator,app.kubernetes.io/component=operator"

// installOperator installs the release's chart, as a user would, into a namespace where the
// restricted Pod Security Standard is enforced, with the release's image that every node holds.
func installOperator(ctx context.Context) error {
	logf("installing the operator's release with Helm (%s:%s, 2 replicas)", operatorRepo, operatorVersion)
	if err := restrictedNamespace(ctx, operatorNS); err != nil {
		return fmt.Errorf("namespace %s: %w", operatorNS, err)
	}
	// Values a platform team sets on every component: a pull secret, a toleration of its
	// platform nodes' taint, its labels and a priority class, which must exist first.
	if err := platformObjects(ctx); err != nil {
		return fmt.Errorf("the platform's PriorityClass and pull secret: %w", err)
	}
	chart := filepath.Join(suite.release, "celld-operator-"+strings.TrimPrefix(operatorVersion, "v")+".tgz")
	// --take-ownership: TestMain installed the CRDs, which the chart installs too.
	if _, err := helm(ctx, "upgrade", "--install", "--take-ownership", "celld-operator", chart, "--namespace", operatorNS,
		"--set", "image.repository="+operatorRepo, "--set", "image.pullPolicy=Never",
		"--set-json", `imagePullSecrets=[{"name":"platform-registry"}]`,
		"--set-json", `tolerations=[{"key":"example.com/platform","operator":"Exists","effect":"NoSchedule"}]`,
		"--set", "podLabels.team=platform", "--set", "priorityClassName=platform-critical",
		"--wait", "--timeout", "4m"); err != nil {
		return err
	}
	if _, err := leader(ctx, 2*time.Minute, ""); err != nil {
		return err
	}
	return nil
}

// platformObjects makes the PriorityClass and the pull secret the chart's values name.
func platformObjects(ctx context.Context) error {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "platform-critical"}, Value: 100000,
		Description: "platform components that heal tenants' workloads"}
	if _, err := suite.kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "platform-registry", Namespace: operatorNS},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	if _, err := suite.kube.CoreV1().Secrets(operatorNS).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// leader waits until the operator's Lease names a holder other than not, and returns it.
func leader(ctx context.Context, timeout time.Duration, not string) (string, error) {
	var holder string
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := suite.kube.CoordinationV1().Leases(operatorNS).Get(ctx, "celld-operator", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, nil
		}
		holder = *l.Spec.HolderIdentity
		return holder != "" && holder != not, nil
	})
	if err != nil {
		return "", fmt.Errorf("the operator's lease: no holder other than %q within %s (last %q): %w", not, timeout, holder, err)
	}
	return holder, nil
}

// operatorPods lists the operator's Pods, and which one holds the lease (its identity starts with
// the Pod's name).
func operatorPods(t *testing.T, ctx context.Context) ([]corev1.Pod, *corev1.Pod) {
	t.Helper()
	l, err := suite.kube.CoreV1().Pods(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: operatorSelector})
	if err != nil {
		t.Fatalf("list the operator's Pods: %v", err)
	}
	holder, err := leader(ctx, time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range l.Items {
		if strings.HasPrefix(holder, l.Items[i].Name+"_") {
			return l.Items, &l.Items[i]
		}
	}
	return l.Items, nil
}

// TestOperatorRunsFromItsRelease: the release's image, installed by its chart with a platform's
// values (pull secret, toleration, labels, priority class), runs as two Pods
// under the restricted standard; one holds the lease; /metrics answers through its Service to a
// token allowed to read it, and to no one else; and helm test passes (the chart's selftest Pod).
func TestOperatorRunsFromItsRelease(t *testing.T) {
	ctx := context.Background()
	operatorWhole(t, ctx)
	pods, lead := operatorPods(t, ctx)
	if len(pods) != 2 {
		t.Fatalf("%d operator Pods, want the chart's 2", len(pods))
	}
	for _, p := range pods {
		if !podReady(&p) {
			t.Errorf("operator Pod %s is not Ready", p.Name)
		}
		if got, want := p.Spec.Containers[0].Image, operatorRepo+":"+operatorVersion; got != want {
			t.Errorf("operator Pod %s runs %s, want the release's %s", p.Name, got, want)
		}
		if p.Spec.NodeName == "" {
			t.Errorf("operator Pod %s is on no node", p.Name)
		}
		// The chart's values for a platform's components reached the running Pods.
		tolerated := false
		for _, tol := range p.Spec.Tolerations {
			tolerated = tolerated || tol.Key == "example.com/platform"
		}
		if !tolerated || p.Labels["team"] != "platform" || p.Spec.PriorityClassName != "platform-critical" ||
			len(p.Spec.ImagePullSecrets) != 1 || p.Spec.ImagePullSecrets[0].Name != "platform-registry" {
			t.Errorf("operator Pod %s: tolerations %v, labels %v, priority class %q, pull secrets %v; want the chart's values",
				p.Name, p.Spec.Tolerations, p.Labels, p.Spec.PriorityClassName, p.Spec.ImagePullSecrets)
		}
	}
	if lead == nil {
		t.Fatal("the lease's holder is none of the operator's Pods")
	}
	ns, err := suite.kube.CoreV1().Namespaces().Get(ctx, operatorNS, metav1.GetOptions{})
	if err != nil || ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace %s does not enforce the restricted standard: %v %v", operatorNS, ns.Labels, err)
	}

	svc, err := suite.kube.CoreV1().Services(operatorNS).Get(ctx, "celld-operator-metrics", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the metrics Service: %v", err)
	}
	url := fmt.Sprintf("https://%s:%d/metrics", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	token := scraperToken(t, ctx)
	// Through the Service's cluster IP, which kube-proxy's rules send to a Pod: the operator's
	// serving certificate is its own, self-signed, so it is not what is checked here.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(bearer string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	var (
		code int
		body string
	)
	// kube-proxy programs a new Service's rules, and its endpoints follow the Pods' readiness, a
	// moment later: until then the cluster IP refuses connections.
	_ = wait.PollUntilContextTimeout(ctx, poll, time.Minute, true, func(context.Context) (bool, error) {
		code, body, err = get(token)
		return err == nil && code == http.StatusOK, nil
	})
	if err != nil || code != http.StatusOK || !strings.Contains(body, "celld_") {
		t.Fatalf("GET %s with the scraper's token: %d %v, want 200 with celld_ series:\n%.400s", url, code, err, body)
	}
	if code, _, err := get(""); err != nil || (code != http.StatusUnauthorized && code != http.StatusForbidden) {
		t.Errorf("GET %s without a token: %d %v, want 401 or 403", url, code, err)
	}

	// helm test: the chart's selftest Pod runs the release's image on a node, on the operator's
	// ServiceAccount, under the restricted standard.
	out, err := helm(ctx, "test", "celld-operator", "--namespace", operatorNS, "--timeout", "3m", "--logs")
	if err != nil || !strings.Contains(out, "ok: a replica leads") || !strings.Contains(out, "ok: the CelldFleet CRD is this release's") {
		t.Errorf("helm test: %v\n%s", err, out)
	}
}

// operatorWhole waits until the operator's Deployment has its two Pods Ready: another test may
// have powered off the node one of them ran on.
func operatorWhole(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := kubectl(ctx, "rollout", "status", "deployment/celld-operator", "-n", operatorNS, "--timeout=3m"); err != nil {
		t.Fatalf("the operator's Deployment is not whole: %v", err)
	}
	waitFor(t, ctx, "both operator Pods Ready", 2*time.Minute, func() bool {
		l, err := suite.kube.CoreV1().Pods(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: operatorSelector})
		if err != nil {
			return false
		}
		ready := 0
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil && podReady(&p) {
				ready++
			}
		}
		return ready == 2 && len(l.Items) == 2
	})
}

// scraperToken is a token of a ServiceAccount bound to the release's metrics-reader role.
func scraperToken(t *testing.T, ctx context.Context) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper", Namespace: operatorNS}}
	if _, err := suite.kube.CoreV1().ServiceAccounts(operatorNS).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("scraper ServiceAccount: %v", err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "realnodes-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "celld-operator-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: operatorNS}},
	}
	if _, err := suite.kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("scraper binding: %v", err)
	}
	tr, err := suite.kube.CoreV1().ServiceAccounts(operatorNS).CreateToken(ctx, "scraper", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("scraper token: %v", err)
	}
	return tr.Status.Token
}

// TestStandbyTakesOver: the leader's Pod deleted, another of the operator's Pods takes the lease,
// and the Deployment is whole again.
func TestStandbyTakesOver(t *testing.T) {
	ctx := context.Background()
	operatorWhole(t, ctx)
	pods, lead := operatorPods(t, ctx)
	if lead == nil || len(pods) != 2 {
		t.Fatalf("want 2 operator Pods and a leader among them, have %d and %v", len(pods), lead)
	}
	var standby string
	for _, p := range pods {
		if p.Name != lead.Name {
			standby = p.Name
		}
	}
	old, err := leader(ctx, time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := suite.kube.CoreV1().Pods(operatorNS).Delete(ctx, lead.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the leader's Pod %s: %v", lead.Name, err)
	}
	holder, err := leader(ctx, 2*time.Minute, old)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start).Round(100 * time.Millisecond)
	// The leader gives the lease up as its Pod stops, and the standby that was running, or the
	// Pod the ReplicaSet starts in its place, whichever asks first, takes it.
	if strings.HasPrefix(holder, lead.Name+"_") {
		t.Fatalf("the deleted leader's Pod %s holds the lease again (%s)", lead.Name, holder)
	}
	if _, err := kubectl(ctx, "rollout", "status", "deployment/celld-operator", "-n", operatorNS, "--timeout=3m"); err != nil {
		t.Errorf("the operator's Deployment is not whole again: %v", err)
	}
	now, _ := operatorPods(t, ctx)
	var running bool
	for _, p := range now {
		running = running || (strings.HasPrefix(holder, p.Name+"_") && p.DeletionTimestamp == nil && podReady(&p))
	}
	if !running {
		t.Errorf("the lease's holder %s is none of the operator's running Pods", holder)
	}
	if strings.HasPrefix(holder, standby+"_") {
		t.Logf("the standby %s took the lease %s after the leader's Pod was deleted", standby, took)
	} else {
		t.Logf("the leader's replacement took the lease %s after the leader's Pod was deleted (the standby %s asked later)", took, standby)
	}
}
