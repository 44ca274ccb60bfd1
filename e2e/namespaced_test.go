package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/render"
)

// TestNamespacedInstall: the operator runs on a token of a ServiceAccount holding exactly the
// rights deploy/namespaced/ grants (its Role in the watched namespace, its small ClusterRole of
// reads and reviews, the leader-election Role in the operator's namespace), with --namespace and
// /metrics over HTTPS; a PersistentFleet and a Bucket fleet are created, grown, shrunk and
// deleted without one request refused, their members run hardened, and those rights write nothing
// outside the watched namespace.
func TestNamespacedInstall(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	opNS := "celld-op-" + f.id
	if _, err := suite.kube.CoreV1().Namespaces().Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: opNS, Labels: map[string]string{testLabel: "true"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = suite.kube.CoreV1().Namespaces().Delete(context.Background(), opNS, metav1.DeleteOptions{})
	})
	installNamespacedRBAC(t, f, opNS)
	installDeploy(t, "rbac/metrics_reader_role.yaml")
	kubeconfig, client := serviceAccountKubeconfig(t, f.ctx, opNS, "celld-operator")

	const other = "default"
	allow := func(verb, group, res, sub, ns string) access { return access{verb, group, res, sub, ns, "", true} }
	deny := func(verb, group, res, sub, ns string) access { return access{verb, group, res, sub, ns, "", false} }
	checkAccess(t, f.ctx, client, []access{
		allow("watch", "celld.io", "celldfleets", "", f.ns),
		allow("patch", "celld.io", "celldfleets", "status", f.ns),
		allow("create", "celld.io", "celldreservations", "", f.ns),
		allow("list", "celld.io", "celldreservations", "", ""),
		allow("create", "apps", "statefulsets", "", f.ns),
		allow("patch", "apps", "deployments", "", f.ns),
		allow("patch", "", "services", "", f.ns),
		allow("patch", "networking.k8s.io", "networkpolicies", "", f.ns),
		allow("patch", "policy", "poddisruptionbudgets", "", f.ns),
		allow("delete", "", "pods", "", f.ns),
		allow("delete", "", "persistentvolumeclaims", "", f.ns),
		allow("create", "", "events", "", f.ns),
		allow("watch", "", "nodes", "", ""),
		allow("watch", "storage.k8s.io", "storageclasses", "", ""),
		allow("create", "authentication.k8s.io", "tokenreviews", "", ""),
		allow("create", "authorization.k8s.io", "subjectaccessreviews", "", ""),
		{"update", "coordination.k8s.io", "leases", "", opNS, "celld-operator", true},
		// Nothing written, and nothing of the fleets' kinds read, outside the watched namespace.
		deny("create", "apps", "statefulsets", "", other),
		deny("patch", "apps", "statefulsets", "", other),
		deny("create", "apps", "deployments", "", other),
		deny("patch", "apps", "deployments", "", other),
		deny("create", "", "services", "", other),
		deny("patch", "", "services", "", other),
		deny("patch", "networking.k8s.io", "networkpolicies", "", other),
		deny("patch", "policy", "poddisruptionbudgets", "", other),
		deny("delete", "", "pods", "", other),
		deny("delete", "", "persistentvolumeclaims", "", other),
		deny("patch", "celld.io", "celldfleets", "", other),
		deny("create", "celld.io", "celldreservations", "", other),
		deny("create", "", "events", "", other),
		deny("list", "apps", "statefulsets", "", ""),
		deny("list", "", "pods", "", ""),
		deny("list", "celld.io", "celldfleets", "", ""),
		deny("list", "", "secrets", "", f.ns),
		deny("update", "", "nodes", "", ""),
		deny("create", "coordination.k8s.io", "leases", "", other),
		deny("*", "*", "*", "", ""),
	})

	op := f.startOperator("--kubeconfig", kubeconfig, "--leader-elect=true", "--leader-election-namespace", opNS,
		"--leader-election-lease-duration=6s", "--leader-election-renew-deadline=4s", "--leader-election-retry-period=1s",
		"--metrics-secure=true")

	pf := f.newFleet("persistent", v1alpha1.ProfilePersistentFleet, 3)
	pf.Spec.Capacity.ScaleInStabilization = duration(0)
	pf = f.create(pf)
	bf := f.create(f.newFleet("bucket", v1alpha1.ProfileBucket, 2))
	f.waitConverged(pf.Name)
	f.waitConverged(bf.Name)
	checkHardenedMembers(t, f, pf)
	checkHardenedMembers(t, f, bf)
	f.update(pf.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 4 })
	f.waitConverged(pf.Name)
	f.update(pf.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 3 })
	f.waitConverged(pf.Name)
	t.Logf("both fleets converged, the PersistentFleet grown to 4 and shrunk to 3")

	// /metrics: refused without a token; served to a token allowed get on /metrics, the reviews
	// made with the namespaced rights.
	reader := metricsReader(t, f, "scraper", "celld-operator-metrics-reader")
	if code, _ := scrape(t, op.Metrics, "/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d, want 401", code)
	}
	if code, body := scrape(t, op.Metrics, "/metrics", reader); code != http.StatusOK || !strings.Contains(body, "celld_operator_api_writes_total") {
		t.Errorf("/metrics with the reader's token: %d, want 200 with the operator's metrics\n%.300s", code, body)
	}

	f.deleteFleet(bf.Name, true)
	f.deleteFleet(pf.Name, true)
	if err := wait.PollUntilContextTimeout(f.ctx, poll, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).List(ctx, metav1.ListOptions{LabelSelector: memberSelector(pf)})
		return err == nil && len(l.Items) == 0, nil
	}); err != nil {
		t.Errorf("claims of the deleted PersistentFleet %s still there", pf.Name)
	}
	log, err := os.ReadFile(op.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			refused = append(refused, line)
		}
	}
	if len(refused) > 0 {
		t.Errorf("the operator was refused %d times on the namespaced rights; first:\n%s", len(refused), strings.Join(refused[:min(len(refused), 5)], "\n"))
	}
}

// installNamespacedRBAC applies the RBAC objects kubectl kustomize renders from deploy/namespaced/,
// moved to this test: the watched namespace celld-fleets becomes the fixture's, the operator's
// namespace celld-system becomes opNS, and cluster-scoped names get the fixture's id, so that no
// other test's binding adds to these rights.
func installNamespacedRBAC(t *testing.T, f *fixture, opNS string) {
	t.Helper()
	out, err := kubectlCmd(f.ctx, "kustomize", filepath.Join(suite.root, "deploy", "namespaced"))
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/namespaced: %v", err)
	}
	moveNS := map[string]string{"celld-fleets": f.ns, "celld-system": opNS}
	var docs []string
	kinds := map[string]int{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil || u.Object == nil {
			t.Fatalf("deploy/namespaced renders a document that is not YAML: %v\n%s", err, doc)
		}
		switch u.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
		default:
			continue
		}
		if u.GetName() == "celld-operator-metrics-reader" || strings.HasPrefix(u.GetName(), "celld-aggregate-to-") {
			// Tenants' rights, not the operator's: they would only add to the built-in roles.
			continue
		}
		kinds[u.GetKind()]++
		if ns := u.GetNamespace(); ns != "" {
			if moveNS[ns] == "" {
				t.Fatalf("deploy/namespaced: %s %s in namespace %s, neither the watched nor the operator's", u.GetKind(), u.GetName(), ns)
			}
			u.SetNamespace(moveNS[ns])
		} else {
			u.SetName(u.GetName() + "-" + f.id)
		}
		if subjects, ok, _ := unstructured.NestedSlice(u.Object, "subjects"); ok {
			for _, s := range subjects {
				if m := s.(map[string]any); moveNS[fmt.Sprint(m["namespace"])] != "" {
					m["namespace"] = moveNS[fmt.Sprint(m["namespace"])]
				}
			}
			_ = unstructured.SetNestedSlice(u.Object, subjects, "subjects")
		}
		if kind, _, _ := unstructured.NestedString(u.Object, "roleRef", "kind"); kind == "ClusterRole" {
			name, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
			_ = unstructured.SetNestedField(u.Object, name+"-"+f.id, "roleRef", "name")
		}
		u.SetLabels(map[string]string{testLabel: "true"})
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	if kinds["Role"] != 2 || kinds["RoleBinding"] != 2 || kinds["ClusterRole"] != 1 || kinds["ClusterRoleBinding"] != 1 || kinds["ServiceAccount"] != 1 {
		t.Fatalf("deploy/namespaced renders %v; want its Role and the leader-election Role with their bindings, one ClusterRole of reads with its binding, and the ServiceAccount", kinds)
	}
	path := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectlCmd(f.ctx, "apply", "--server-side", "--field-manager", "e2e", "-f", path); err != nil {
		t.Fatalf("apply deploy/namespaced's RBAC: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := kubectlCmd(ctx, "delete", "--ignore-not-found", "--wait=false", "-f", path); err != nil {
			t.Errorf("delete deploy/namespaced's RBAC: %v", err)
		}
	})
}

// checkHardenedMembers judges the Pods the API server holds: no API token mounted, a read-only
// root filesystem, and a scratch emptyDir.
func checkHardenedMembers(t *testing.T, f *fixture, fl *v1alpha1.CelldFleet) {
	t.Helper()
	pods := f.members(fl)
	if len(pods) == 0 {
		t.Fatalf("no members of %s", fl.Name)
	}
	for _, p := range pods {
		if p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken {
			t.Errorf("member %s: automountServiceAccountToken %v, want false", p.Name, p.Spec.AutomountServiceAccountToken)
		}
		for _, v := range p.Spec.Volumes {
			if v.Projected != nil {
				t.Errorf("member %s mounts a projected volume %s (an API token)", p.Name, v.Name)
			}
		}
		c := p.Spec.Containers[0]
		if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("member %s: root filesystem not read-only", p.Name)
		}
		scratch := false
		for _, m := range c.VolumeMounts {
			for _, v := range p.Spec.Volumes {
				if v.Name == m.Name && m.MountPath == render.ScratchMountPath && v.EmptyDir != nil && !m.ReadOnly {
					scratch = true
				}
			}
		}
		if !scratch {
			t.Errorf("member %s: no writable scratch emptyDir at %s", p.Name, render.ScratchMountPath)
		}
	}
}

// metricsReader makes a ServiceAccount in the fixture's namespace bound to clusterRole, and
// returns a token of it.
func metricsReader(t *testing.T, f *fixture, name, clusterRole string) string {
	t.Helper()
	if _, err := suite.kube.CoreV1().ServiceAccounts(f.ns).Create(f.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if clusterRole != "" {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + f.id, Labels: map[string]string{testLabel: "true"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: f.ns}},
		}
		if _, err := suite.kube.RbacV1().ClusterRoleBindings().Create(f.ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = suite.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		})
	}
	secs := int64(3600)
	tok, err := suite.kube.CoreV1().ServiceAccounts(f.ns).CreateToken(f.ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}

// scrape GETs path over HTTPS from the operator's metrics address, with token as a bearer token
// when set. The certificate is the operator's self-signed one: it is not verified.
func scrape(t *testing.T, addr, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the operator's self-signed certificate
	}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET https://%s%s: %v", addr, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(bufio.NewReader(resp.Body))
	return resp.StatusCode, string(body)
}

// TestMetricsNeedAToken: by default /metrics is HTTPS and served only to a bearer token the API
// server authenticates whose identity may get /metrics (the shipped ClusterRole
// celld-operator-metrics-reader); the profiler (--pprof) is behind the same check, which the
// metrics reader does not pass.
func TestMetricsNeedAToken(t *testing.T) {
	t.Parallel()
	installDeploy(t, "rbac/metrics_reader_role.yaml")
	f := newFixture(t)
	op := f.startOperator("--metrics-secure=true", "--pprof")

	pprofRole := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "celld-e2e-pprof-" + f.id, Labels: map[string]string{testLabel: "true"}},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/debug/pprof/*"}, Verbs: []string{"get"}}},
	}
	if _, err := suite.kube.RbacV1().ClusterRoles().Create(f.ctx, pprofRole, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = suite.kube.RbacV1().ClusterRoles().Delete(context.Background(), pprofRole.Name, metav1.DeleteOptions{})
	})
	reader := metricsReader(t, f, "reader", "celld-operator-metrics-reader")
	stranger := metricsReader(t, f, "stranger", "")
	profiler := metricsReader(t, f, "profiler", pprofRole.Name)

	for _, tc := range []struct {
		who, path, token string
		want             int
	}{
		{"no token", "/metrics", "", http.StatusUnauthorized},
		{"a forged token", "/metrics", "not-a-token", http.StatusUnauthorized},
		{"a ServiceAccount without the right", "/metrics", stranger, http.StatusForbidden},
		{"the metrics reader", "/metrics", reader, http.StatusOK},
		{"no token", "/debug/pprof/", "", http.StatusUnauthorized},
		{"the metrics reader", "/debug/pprof/", reader, http.StatusForbidden},
		{"an identity allowed /debug/pprof/*", "/debug/pprof/", profiler, http.StatusOK},
	} {
		code, body := scrape(t, op.Metrics, tc.path, tc.token)
		if code != tc.want {
			t.Errorf("%s on %s: %d, want %d\n%.200s", tc.who, tc.path, code, tc.want, body)
		}
		if tc.path == "/metrics" && code == http.StatusOK && !strings.Contains(body, "celld_operator_api_requests_total") {
			t.Errorf("%s on /metrics: 200 without the operator's metrics", tc.who)
		}
		if code != http.StatusOK && strings.Contains(body, "celld_operator_") {
			t.Errorf("%s on %s: refused (%d) but the body has metrics", tc.who, tc.path, code)
		}
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + op.Metrics + "/metrics")
	if err == nil {
		if resp.StatusCode == http.StatusOK {
			t.Errorf("/metrics over plain HTTP: 200, want no plain HTTP at all")
		}
		resp.Body.Close()
	}
}
