package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// impersonated are clients that act as user, through the admin kubeconfig.
func impersonated(t *testing.T, user string) (kubernetes.Interface, versioned.Interface) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate.UserName = user
	k, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k, c
}

// bindReservationPolicy binds the shipped ValidatingAdmissionPolicy as the shipped binding does,
// but in the test's namespace only: the other tests' operators run as the admin, which the policy
// refuses.
func (f *fixture) bindReservationPolicy() {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(suite.root, "deploy", "rbac", "reservation_policy_binding.yaml"))
	if err != nil {
		f.t.Fatal(err)
	}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict(data, b); err != nil {
		f.t.Fatalf("deploy/rbac/reservation_policy_binding.yaml: %v", err)
	}
	b.Name += "-" + f.id
	b.Labels = map[string]string{testLabel: "true"}
	b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{corev1.LabelMetadataName: f.ns}}}
	client := suite.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if _, err := client.Create(f.ctx, b, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("bind the reservation policy in %s: %v", f.ns, err)
	}
	f.t.Cleanup(func() { _ = client.Delete(context.Background(), b.Name, metav1.DeleteOptions{}) })
	// The API server compiles and loads a policy and its binding asynchronously.
	probe := &v1alpha1.CelldReservation{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: v1alpha1.CelldReservationSpec{FleetName: "probe", FleetUID: "00000000-0000-0000-0000-000000000000", Profile: v1alpha1.ProfileBucket,
			Bucket: v1alpha1.BucketSpec{Name: "probe-bucket", Region: "us-east-1"}}}
	if err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := suite.celld.CelldV1alpha1().CelldReservations(f.ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "celld operator alone"), nil
	}); err != nil {
		f.t.Fatalf("the reservation policy bound in %s never refused the admin's reservation", f.ns)
	}
}

// canI asks the API server whether user may verb the resource in the test's namespace.
func (f *fixture) canI(user, verb, resource, sub string) bool {
	f.t.Helper()
	r, err := suite.kube.AuthorizationV1().SubjectAccessReviews().Create(f.ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: f.ns, Verb: verb, Group: v1alpha1.GroupName, Resource: resource, Subresource: sub},
	}}, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return r.Status.Allowed
}

// TestReservationsAreTheOperatorsAlone: with deploy/'s admission policy, its aggregated roles and
// the operator on its ServiceAccount, a tenant bound to the built-in edit role runs fleets but
// cannot create, change or delete a reservation, nor write its status; a user whom RBAC lets
// write reservations, and the cluster administrator, are refused by the policy, and the
// administrator may still delete one (the operator then makes it again); and a reservation the
// operator did not make (one from before the policy) reserves nothing: the fleet it would have
// refused binds its bucket.
func TestReservationsAreTheOperatorsAlone(t *testing.T) {
	t.Parallel()
	installDeploy(t, "namespace.yaml", "rbac/service_account.yaml", "rbac/cluster_role.yaml", "rbac/cluster_role_binding.yaml",
		"rbac/reservation_policy.yaml", "rbac/aggregate_view.yaml", "rbac/aggregate_edit.yaml", "rbac/aggregate_admin.yaml")
	f := newFixture(t)
	f.bindReservationPolicy()
	kubeconfig, _ := serviceAccountKubeconfig(t, f.ctx, operatorNamespace, "celld-operator")
	f.startOperator("--kubeconfig", kubeconfig)

	tenant, writer := "tenant-"+f.id, "writer-"+f.id
	rb := func(name, kind, role, user string) {
		if _, err := suite.kube.RbacV1().RoleBindings(f.ns).Create(f.ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rb("tenant-edit", "ClusterRole", "edit", tenant)
	// A user RBAC lets write reservations, as a careless Role would: only the policy stops them.
	if _, err := suite.kube.RbacV1().Roles(f.ns).Create(f.ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reservation-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"celldreservations", "celldreservations/status"},
			Verbs: []string{"get", "list", "create", "update", "patch"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb("writer", "Role", "reservation-writer", writer)

	// The built-in edit role carries the shipped rules once the aggregation controller folds them in.
	if err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(context.Context) (bool, error) {
		return f.canI(tenant, "create", "celldfleets", "") && f.canI(tenant, "update", "celldfleets", "scale"), nil
	}); err != nil {
		t.Fatalf("tenant %s bound to edit may not create and scale fleets: the aggregated rules are missing", tenant)
	}
	for _, r := range []struct {
		verb, res, sub string
		want           bool
	}{
		{"get", "celldreservations", "", true}, {"list", "celldreservations", "", true}, {"watch", "celldreservations", "", true},
		{"create", "celldreservations", "", false}, {"update", "celldreservations", "", false}, {"patch", "celldreservations", "", false},
		{"delete", "celldreservations", "", false}, {"deletecollection", "celldreservations", "", false},
		{"update", "celldreservations", "status", false}, {"patch", "celldreservations", "status", false},
		{"update", "celldfleets", "status", false}, {"delete", "celldfleets", "", true},
	} {
		if got := f.canI(tenant, r.verb, r.res, r.sub); got != r.want {
			t.Errorf("edit role: %s %s/%s allowed=%v, want %v", r.verb, r.res, r.sub, got, r.want)
		}
	}

	// The tenant runs a fleet: the operator, on its ServiceAccount, makes and writes its
	// reservation under the policy.
	_, tenantCelld := impersonated(t, tenant)
	fl := f.newFleet("tenant-fleet", v1alpha1.ProfileBucket, 2)
	fl, err := tenantCelld.CelldV1alpha1().CelldFleets(f.ns).Create(f.ctx, fl, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("tenant creates a fleet: %v", err)
	}
	t.Cleanup(func() { f.deleteFleet(fl.Name, false) })
	f.waitConverged(fl.Name)
	res := f.reservation(fl)
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Members = 3 })
	f.waitConverged(fl.Name)
	if r := f.reservation(fl); len(r.Status.CapacityHistory) == 0 {
		t.Errorf("reservation %s: no capacity history after a growth: the operator could not write its status", r.Name)
	}

	forbidden := func(who, what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %s: %v; want 403 Forbidden", who, what, err)
		} else {
			t.Logf("%s: %s: refused: %v", who, what, err)
		}
	}
	forged := &v1alpha1.CelldReservation{ObjectMeta: metav1.ObjectMeta{Name: f.bucket("victim")},
		Spec: v1alpha1.CelldReservationSpec{FleetName: "victim", FleetUID: "00000000-0000-0000-0000-00000000beef", Profile: v1alpha1.ProfileBucket,
			Bucket: v1alpha1.BucketSpec{Name: f.bucket("victim"), Region: "us-east-1"}}}
	_, writerCelld := impersonated(t, writer)
	for who, c := range map[string]versioned.Interface{"tenant (edit)": tenantCelld, "writer (RBAC allows)": writerCelld, "cluster admin": suite.celld} {
		client := c.CelldV1alpha1().CelldReservations(f.ns)
		_, err := client.Create(f.ctx, forged, metav1.CreateOptions{})
		forbidden(who, "create a reservation", err)
		cur := f.reservation(fl)
		cur.Labels["e2e"] = "changed"
		_, err = client.Update(f.ctx, cur, metav1.UpdateOptions{})
		forbidden(who, "change the fleet's reservation", err)
		cur = f.reservation(fl)
		cur.Status.CapacityHistory = nil
		_, err = client.UpdateStatus(f.ctx, cur, metav1.UpdateOptions{})
		forbidden(who, "clear the fleet's reservation's history", err)
		_, err = client.Patch(f.ctx, cur.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"e2e":"patched"}}}`), metav1.PatchOptions{})
		forbidden(who, "patch the fleet's reservation", err)
	}
	forbidden("tenant (edit)", "delete the fleet's reservation", tenantCelld.CelldV1alpha1().CelldReservations(f.ns).Delete(f.ctx, res.Name, metav1.DeleteOptions{}))
	// An update that changes nothing is let through, as a storage migration makes it (kubectl
	// celld migrate-storage), and binds nothing new: the reservation stays the operator's.
	if _, err := suite.celld.CelldV1alpha1().CelldReservations(f.ns).Update(f.ctx, f.reservation(fl), metav1.UpdateOptions{}); err != nil {
		t.Errorf("cluster admin: an update of the fleet's reservation that changes nothing: %v; want it let through", err)
	}
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Members = 4 })
	f.waitConverged(fl.Name)
	if r := f.reservation(fl); r.UID != res.UID || r.Spec != res.Spec {
		t.Errorf("the fleet's reservation changed: %+v, was %+v", r.Spec, res.Spec)
	}

	// Deleting stays with the cluster administrator; the operator then makes the reservation again.
	if err := suite.celld.CelldV1alpha1().CelldReservations(f.ns).Delete(f.ctx, res.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("cluster admin deletes a reservation: %v", err)
	}
	if err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		r, err := suite.celld.CelldV1alpha1().CelldReservations(f.ns).Get(ctx, res.Name, metav1.GetOptions{})
		return err == nil && r.UID != res.UID && r.Spec.FleetUID == fl.UID, nil
	}); err != nil {
		t.Errorf("reservation %s not made again by the operator after the admin deleted it", res.Name)
	}

	// A reservation the operator did not make, from before the policy (made here in a namespace
	// the test's binding leaves out, with every label the operator would put on it), for the
	// bucket a new fleet names: it binds nothing, and the fleet binds its bucket.
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-old", Labels: map[string]string{testLabel: "true"}}}
	if _, err := suite.kube.CoreV1().Namespaces().Create(f.ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = suite.kube.CoreV1().Namespaces().Delete(context.Background(), other.Name, metav1.DeleteOptions{})
	})
	squat := forged.DeepCopy()
	squat.Name, squat.Spec.Bucket.Name = f.bucket("squatted"), f.bucket("squatted")
	squat.Labels = map[string]string{kinds.LabelName: kinds.AppName, kinds.LabelManagedBy: kinds.ManagedBy,
		kinds.LabelInstance: squat.Spec.FleetName, kinds.LabelFleetUID: string(squat.Spec.FleetUID), kinds.LabelComponent: "reservation"}
	squat, err = suite.celld.CelldV1alpha1().CelldReservations(other.Name).Create(f.ctx, squat, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a reservation from before the policy: %v", err)
	}
	victim := f.newFleet("squatted", v1alpha1.ProfileBucket, 1)
	victim, err = tenantCelld.CelldV1alpha1().CelldFleets(f.ns).Create(f.ctx, victim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.deleteFleet(victim.Name, false) })
	got := f.waitConverged(victim.Name)
	bound := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReservationBound)
	if bound == nil || bound.Status != metav1.ConditionTrue {
		t.Errorf("ReservationBound %+v; want True", bound)
	}
	if r := f.reservation(victim); r.Namespace != f.ns || r.Spec.FleetUID != victim.UID {
		t.Errorf("fleet %s bound by %s/%s to %s; want its own reservation in %s", victim.Name, r.Namespace, r.Name, r.Spec.FleetUID, f.ns)
	}
	if cur, err := suite.celld.CelldV1alpha1().CelldReservations(other.Name).Get(f.ctx, squat.Name, metav1.GetOptions{}); err != nil || cur.ResourceVersion != squat.ResourceVersion {
		t.Errorf("the reservation the operator did not make: %v; want it left as it was", err)
	}
	t.Logf("%s", fmt.Sprintf("fleet %s bound bucket %s past a reservation the operator did not make (%s/%s)", victim.Name, victim.Spec.Bucket.Name, other.Name, squat.Name))
}
