package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// operatorUser is the identity deploy/ gives the operator.
const operatorUser = "system:serviceaccount:" + operatorNamespace + ":celld-operator"

// TestLeastPrivilege: the operator runs on a token of deploy/'s ServiceAccount, with exactly the
// rights of deploy/rbac (its ClusterRole, and its Role for the leader-election Lease in
// celld-system, where it elects itself), through a whole lifecycle of both profiles without one
// request refused; and those rights deny what it must never do: Secrets, pods/exec, writes to
// Nodes, destructive or non-fleet verbs in any namespace, RBAC escalation.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	installDeploy(t, "namespace.yaml", "rbac/service_account.yaml", "rbac/cluster_role.yaml",
		"rbac/cluster_role_binding.yaml", "rbac/leader_election_role.yaml", "rbac/leader_election_role_binding.yaml")
	f := newFixture(t)
	kubeconfig, client := serviceAccountKubeconfig(t, f.ctx, operatorNamespace, "celld-operator")

	who, err := client.AuthenticationV1().SelfSubjectReviews().Create(f.ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("who am I, with the token: %v", err)
	}
	if u := who.Status.UserInfo; u.Username != operatorUser {
		t.Fatalf("the token authenticates as %q %v; want %s", u.Username, u.Groups, operatorUser)
	} else {
		t.Logf("the operator's kubeconfig authenticates as %s, groups %v", u.Username, u.Groups)
	}

	rows := operatorAccess(f.ns)
	checkAccess(t, f.ctx, client, rows)
	checkDenials(t, f.ctx, client, f.ns)

	op := f.startOperator("--kubeconfig", kubeconfig, "--leader-elect=true", "--leader-election-namespace", operatorNamespace,
		"--leader-election-lease-duration=6s", "--leader-election-renew-deadline=4s", "--leader-election-retry-period=1s")
	start := time.Now()

	// PersistentFleet: created, grown, shrunk one member per step, a member healed, deleted with
	// its claims. A Bucket fleet alongside: created, converged, deleted.
	const grace = 10 * time.Second
	pf := f.newFleet("persistent", v1alpha1.ProfilePersistentFleet, 3)
	pf.Spec.Capacity.ScaleInStabilization = duration(0)
	pf.Spec.Healing.UnreachableGracePeriod = duration(grace)
	pf = f.create(pf)
	bf := f.create(f.newFleet("bucket", v1alpha1.ProfileBucket, 2))
	f.waitConverged(pf.Name)
	f.waitConverged(bf.Name)
	if lease, err := suite.kube.CoordinationV1().Leases(operatorNamespace).Get(f.ctx, "celld-operator", metav1.GetOptions{}); err != nil {
		t.Errorf("leader-election lease in %s: %v", operatorNamespace, err)
	} else if holder := valueOr(lease.Spec.HolderIdentity, ""); holder == "" {
		t.Errorf("lease %s/%s held by nobody while the fleets converged", operatorNamespace, lease.Name)
	} else {
		t.Logf("lease %s/%s held by %s", operatorNamespace, lease.Name, holder)
	}
	t.Logf("both fleets converged %s after the operator started", time.Since(start).Round(100*time.Millisecond))

	if _, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, bf.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("deployment of Bucket fleet %s: %v", bf.Name, err)
	}
	f.deleteFleet(bf.Name, true)
	// The garbage collector deletes the workload after its owner, as the operator has no right to.
	if err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := suite.kube.AppsV1().Deployments(f.ns).Get(ctx, bf.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("deployment %s of the deleted Bucket fleet still there after a minute", bf.Name)
	}
	t.Logf("Bucket fleet created, converged and deleted")

	sets, claims := f.recordStatefulSets(), f.recordClaims()
	f.update(pf.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 5 })
	f.waitConverged(pf.Name)
	grow := statefulSetChanges(sets.Await(t, "rolled out at 5", rolledOutAt(pf.Name, 5)), pf.Name)
	if len(grow) != 1 || grow[0].from != 3 || grow[0].to != 5 {
		t.Fatalf("grow 3 to 5: want one change 3->5 of spec.replicas, got %+v", grow)
	}
	f.update(pf.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 3 })
	f.waitConverged(pf.Name)
	checkOneStepShrink(t, statefulSetChanges(sets.Await(t, "rolled out at 3", rolledOutAt(pf.Name, 3)), pf.Name)[1:], 5, 3)

	healBrokenRollout(t, f, op, pf)

	if dels := deletions(claims.Events(t)); len(dels) != 0 {
		t.Errorf("claims deleted before the fleet was: %v", names(dels))
	}
	l, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).List(f.ctx, metav1.ListOptions{LabelSelector: memberSelector(pf)})
	if err != nil {
		t.Fatal(err)
	}
	var own []types.UID
	for _, c := range l.Items {
		own = append(own, c.UID)
	}
	if len(own) != 5 {
		t.Errorf("claims of %s before deletion: %d; want 5 (scale-in keeps them)", pf.Name, len(own))
	}
	f.deleteFleet(pf.Name, true)
	claims.Await(t, "the fleet's claims gone", gone(own...))
	t.Logf("PersistentFleet grown 3->5, shrunk 5->3, healed, deleted with its %d claims, %s after the operator started",
		len(own), time.Since(start).Round(100*time.Millisecond))

	total, by := op.writes(t)
	t.Logf("the operator's writes, by verb and resource (%g):%s", total, formatSeries(by))
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
		t.Errorf("the operator was refused %d times; first:\n%s", len(refused), strings.Join(refused[:min(len(refused), 5)], "\n"))
	}
	t.Logf("operator log: %d lines, none with \"forbidden\"", strings.Count(string(log), "\n"))
}

// healBrokenRollout breaks a fleet's template (more CPU than any node has: kwok makes every
// scheduled Pod ready whatever its image), waits for the last member to be stuck on it, fixes it
// and waits for the operator to replace that member, as TestBrokenRolloutHealed does.
func healBrokenRollout(t *testing.T, f *fixture, op *operator, fl *v1alpha1.CelldFleet) {
	t.Helper()
	good := f.statefulSet(fl.Name).Status.UpdateRevision
	setCPU := func(q string) {
		f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(q) })
	}
	setCPU("1000")
	last := fmt.Sprintf("%s-%d", fl.Name, fl.Spec.Members-1)
	broken := f.waitPod(last, time.Minute, "on the new revision and unschedulable", func(p *corev1.Pod) bool {
		return p.Labels[appsv1.ControllerRevisionHashLabelKey] != good && unschedulable(p)
	})
	setCPU("100m")
	f.waitConverged(fl.Name)
	if total, by := op.heals(t); total != 1 || by[`{reason="BrokenRollout"}`] != 1 {
		t.Errorf("heals_total: %g%s; want one BrokenRollout", total, formatSeries(by))
	}
	if p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, last, metav1.GetOptions{}); err == nil && p.UID == broken.UID {
		t.Errorf("member %s (%s) stuck on the broken revision is still there", last, broken.UID)
	}
	t.Logf("member %s (%s), stuck on a broken revision, replaced", last, broken.UID)
}

func valueOr(s *string, dflt string) string {
	if s == nil {
		return dflt
	}
	return *s
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates with a bound token of the
// ServiceAccount (TokenRequest API), for the admin kubeconfig's cluster, and returns its path and
// a client built from that file.
func serviceAccountKubeconfig(t *testing.T, ctx context.Context, ns, name string) (string, kubernetes.Interface) {
	t.Helper()
	secs := int64(2 * 3600)
	tok, err := suite.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for serviceaccount %s/%s: %v", ns, name, err)
	}
	admin, err := clientcmd.LoadFromFile(suite.kubeconfig)
	if err != nil {
		t.Fatalf("admin kubeconfig: %v", err)
	}
	current, ok := admin.Contexts[admin.CurrentContext]
	if !ok || admin.Clusters[current.Cluster] == nil {
		t.Fatalf("admin kubeconfig %s: no cluster for context %q", suite.kubeconfig, admin.CurrentContext)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = admin.Clusters[current.Cluster]
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	rest, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", path, err)
	}
	client, err := kubernetes.NewForConfig(rest)
	if err != nil {
		t.Fatal(err)
	}
	return path, client
}

// access is one request the operator's identity is, or is not, allowed to make.
type access struct {
	verb, group, resource, sub, ns, name string
	allowed                              bool
}

func (a access) String() string {
	r := a.resource
	if a.group != "" {
		r += "." + a.group
	}
	if a.sub != "" {
		r += "/" + a.sub
	}
	where := "cluster-wide"
	if a.ns != "" {
		where = "in " + a.ns
	}
	if a.name != "" {
		r += " " + a.name
	}
	return a.verb + " " + r + " " + where
}

// operatorAccess is what deploy/rbac must grant the operator of fleets in ns (what it does), and
// must not (what it never does). The ClusterRole applies in every namespace, since fleets live in
// any: reading and server-side applying a fleet's kinds, and deleting Pods and claims, are
// allowed anywhere; everything else is denied everywhere.
func operatorAccess(ns string) []access {
	const other, celld = "kube-system", operatorNamespace
	allow := func(verb, group, res, sub, ns string) access { return access{verb, group, res, sub, ns, "", true} }
	deny := func(verb, group, res, sub, ns string) access { return access{verb, group, res, sub, ns, "", false} }
	return []access{
		// What the operator needs.
		allow("watch", "celld.io", "celldfleets", "", ns),
		allow("patch", "celld.io", "celldfleets", "", ns),
		allow("patch", "celld.io", "celldfleets", "status", ns),
		allow("update", "celld.io", "celldfleets", "finalizers", ns),
		allow("list", "celld.io", "celldreservations", "", ""),
		allow("watch", "celld.io", "celldreservations", "", ""),
		allow("create", "celld.io", "celldreservations", "", ns),
		allow("update", "celld.io", "celldreservations", "status", ns),
		allow("watch", "apps", "statefulsets", "", ns),
		allow("create", "apps", "statefulsets", "", ns),
		allow("patch", "apps", "statefulsets", "", ns),
		allow("create", "apps", "deployments", "", ns),
		allow("patch", "apps", "deployments", "", ns),
		allow("patch", "", "services", "", ns),
		allow("patch", "networking.k8s.io", "networkpolicies", "", ns),
		allow("patch", "policy", "poddisruptionbudgets", "", ns),
		allow("watch", "", "pods", "", ns),
		allow("delete", "", "pods", "", ns),
		allow("delete", "", "persistentvolumeclaims", "", ns),
		// A claim's storage request raised to spec.storage.size; a StatefulSet deleted with
		// propagation Orphan to be created again with claims of that size. A hibernating fleet's
		// workload, either kind, deleted with propagation Background.
		allow("patch", "", "persistentvolumeclaims", "", ns),
		allow("delete", "apps", "statefulsets", "", ns),
		allow("delete", "apps", "deployments", "", ns),
		allow("watch", "", "nodes", "", ""),
		allow("get", "", "nodes", "", ""),
		allow("watch", "storage.k8s.io", "storageclasses", "", ""),
		allow("watch", "", "serviceaccounts", "", ns),
		allow("create", "", "events", "", ns),
		allow("patch", "", "events", "", ns),
		allow("create", "authentication.k8s.io", "tokenreviews", "", ""),
		allow("create", "authorization.k8s.io", "subjectaccessreviews", "", ""),
		{"update", "coordination.k8s.io", "leases", "", celld, "celld-operator", true},
		{"create", "coordination.k8s.io", "leases", "", celld, "", true},
		// Whether a deleted fleet goes with its CRD (an uninstall, which keeps its disks).
		{"get", "apiextensions.k8s.io", "customresourcedefinitions", "", "", "celldfleets.celld.io", true},

		// Secrets: nothing, anywhere.
		deny("get", "", "secrets", "", ns),
		deny("list", "", "secrets", "", ns),
		deny("watch", "", "secrets", "", ns),
		deny("list", "", "secrets", "", ""),
		deny("watch", "", "secrets", "", ""),
		deny("get", "", "secrets", "", celld),
		deny("create", "", "secrets", "", ns),
		// Into a member: no exec, attach, port-forward, ephemeral container.
		deny("create", "", "pods", "exec", ns),
		deny("get", "", "pods", "exec", ns),
		deny("create", "", "pods", "attach", ns),
		deny("create", "", "pods", "portforward", ns),
		deny("patch", "", "pods", "ephemeralcontainers", ns),
		// Pods are only ever deleted (a heal), never made or changed directly, nor evicted.
		deny("create", "", "pods", "", ns),
		deny("update", "", "pods", "", ns),
		deny("patch", "", "pods", "", ns),
		deny("create", "", "pods", "eviction", ns),
		// Nodes: read only.
		deny("update", "", "nodes", "", ""),
		deny("patch", "", "nodes", "", ""),
		deny("delete", "", "nodes", "", ""),
		deny("create", "", "nodes", "", ""),
		deny("patch", "", "nodes", "status", ""),
		deny("get", "", "nodes", "proxy", ""),
		// The kinds the operator applies are applied, never replaced or deleted (but a
		// workload, above): their owner reference lets the garbage collector delete them with
		// the fleet.
		deny("update", "apps", "statefulsets", "", ns),
		deny("deletecollection", "apps", "statefulsets", "", ns),
		deny("update", "apps", "statefulsets", "scale", ns),
		deny("deletecollection", "apps", "deployments", "", ns),
		deny("update", "apps", "deployments", "", ns),
		deny("delete", "", "services", "", ns),
		deny("update", "", "services", "", ns),
		deny("delete", "networking.k8s.io", "networkpolicies", "", ns),
		deny("delete", "policy", "poddisruptionbudgets", "", ns),
		deny("delete", "apps", "replicasets", "", ns),
		deny("create", "", "persistentvolumeclaims", "", ns),
		deny("update", "", "persistentvolumeclaims", "", ns),
		deny("delete", "", "persistentvolumes", "", ""),
		// Fleets and reservations belong to people: the operator never creates, replaces or deletes
		// a fleet, nor deletes or rewrites a reservation.
		deny("create", "celld.io", "celldfleets", "", ns),
		deny("update", "celld.io", "celldfleets", "", ns),
		deny("delete", "celld.io", "celldfleets", "", ns),
		deny("delete", "celld.io", "celldreservations", "", ns),
		deny("patch", "celld.io", "celldreservations", "", ns),
		// Other namespaces' non-fleet objects, and the same kinds in the fleet's.
		deny("get", "", "configmaps", "", other),
		deny("list", "", "configmaps", "", ""),
		deny("create", "", "configmaps", "", ns),
		deny("create", "batch", "jobs", "", other),
		deny("create", "batch", "jobs", "", ns),
		deny("create", "batch", "cronjobs", "", ns),
		deny("create", "apps", "daemonsets", "", other),
		deny("create", "", "serviceaccounts", "", ns),
		deny("create", "", "serviceaccounts", "token", other),
		deny("delete", "", "namespaces", "", ""),
		deny("create", "", "namespaces", "", ""),
		// The Lease is the operator's own, in its namespace only.
		deny("get", "coordination.k8s.io", "leases", "", other),
		deny("update", "coordination.k8s.io", "leases", "", ns),
		deny("delete", "coordination.k8s.io", "leases", "", celld),
		// No way to more rights.
		deny("create", "rbac.authorization.k8s.io", "roles", "", other),
		deny("create", "rbac.authorization.k8s.io", "rolebindings", "", other),
		deny("create", "rbac.authorization.k8s.io", "rolebindings", "", ns),
		deny("update", "rbac.authorization.k8s.io", "roles", "", celld),
		deny("create", "rbac.authorization.k8s.io", "clusterrolebindings", "", ""),
		deny("escalate", "rbac.authorization.k8s.io", "clusterroles", "", ""),
		deny("bind", "rbac.authorization.k8s.io", "clusterroles", "", ""),
		deny("escalate", "rbac.authorization.k8s.io", "roles", "", ns),
		deny("impersonate", "", "users", "", ""),
		deny("impersonate", "", "serviceaccounts", "", ns),
		deny("create", "certificates.k8s.io", "certificatesigningrequests", "", ""),
		deny("create", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", ""),
		deny("delete", "apiextensions.k8s.io", "customresourcedefinitions", "", ""),
		deny("list", "apiextensions.k8s.io", "customresourcedefinitions", "", ""),
		{"get", "apiextensions.k8s.io", "customresourcedefinitions", "", "", "celldreservations.celld.io", false},
		deny("*", "*", "*", "", ""),
	}
}

// checkAccess asks the API server, as the token's own identity (SelfSubjectAccessReview), about
// each row: the table fails both ways, on a right missing as on a right too many.
func checkAccess(t *testing.T, ctx context.Context, client kubernetes.Interface, rows []access) {
	t.Helper()
	allowed, denied := 0, 0
	for _, a := range rows {
		r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: a.ns, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub, Name: a.name,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("access review %s: %v", a, err)
		}
		switch got := r.Status.Allowed && !r.Status.Denied; {
		case got != a.allowed:
			t.Errorf("%s: allowed=%v, want %v (%s)", a, got, a.allowed, r.Status.Reason)
		case got:
			allowed++
		default:
			denied++
		}
	}
	t.Logf("access reviews as %s: %d rows, %d allowed and %d denied as expected", operatorUser, len(rows), allowed, denied)
}

// checkDenials makes real requests with the operator's token (writes as server-side dry runs, so
// a wrong answer changes nothing) and expects 403 Forbidden; reads it needs are let through.
func checkDenials(t *testing.T, ctx context.Context, client kubernetes.Interface, ns string) {
	t.Helper()
	dry := []string{metav1.DryRunAll}
	node := ""
	if l, err := suite.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil || len(l.Items) == 0 {
		t.Fatalf("a node to try: %v", err)
	} else {
		node = l.Items[0].Name
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
	}
	requests := []struct {
		what    string
		allowed bool
		do      func() error
	}{
		{"list secrets in the fleet's namespace", false, func() error {
			_, err := client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list secrets cluster-wide", false, func() error {
			_, err := client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"watch secrets cluster-wide", false, func() error {
			w, err := client.CoreV1().Secrets("").Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"exec into a pod", false, func() error {
			return client.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name("probe").SubResource("exec").
				Param("container", "c").Param("command", "true").Param("stdout", "true").Do(ctx).Error()
		}},
		{"create a pod", false, func() error {
			_, err := client.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: dry})
			return err
		}},
		{"patch a node", false, func() error {
			_, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"metadata":{"labels":{"e2e.celld.io/probe":"x"}}}`),
				metav1.PatchOptions{DryRun: dry})
			return err
		}},
		{"delete a node", false, func() error {
			return client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{DryRun: dry})
		}},
		{"create a configmap in kube-system", false, func() error {
			_, err := client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}},
				metav1.CreateOptions{DryRun: dry})
			return err
		}},
		// Deleting a Deployment is the operator's now (a Bucket fleet's, to hibernate it): the
		// access review allows it; a kind it never runs stays out of reach.
		{"delete a daemonset", false, func() error {
			return client.AppsV1().DaemonSets(ns).Delete(ctx, "probe", metav1.DeleteOptions{DryRun: dry})
		}},
		{"mint a token for the namespace's default serviceaccount", false, func() error {
			_, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{DryRun: dry})
			return err
		}},
		{"list nodes", true, func() error {
			_, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
			return err
		}},
		{"list pods in the fleet's namespace", true, func() error {
			_, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err
		}},
	}
	for _, r := range requests {
		err := r.do()
		switch {
		case r.allowed && err != nil:
			t.Errorf("%s with the operator's token: %v; want it allowed", r.what, err)
		case !r.allowed && !apierrors.IsForbidden(err):
			t.Errorf("%s with the operator's token: %v; want 403 Forbidden", r.what, err)
		}
	}
	t.Logf("%d real requests with the operator's token answered as expected (writes as dry runs)", len(requests))
}
