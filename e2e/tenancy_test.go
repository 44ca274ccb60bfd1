package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/machine"
)

// tenant is a user bound to the built-in edit role in one fixture's namespace, and the clients that
// act as that user.
type tenant struct {
	f     *fixture
	user  string
	celld versioned.Interface
}

func newTenant(t *testing.T, f *fixture, name string) *tenant {
	t.Helper()
	user := name + "-" + f.id
	if _, err := suite.kube.RbacV1().RoleBindings(f.ns).Create(f.ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The built-in edit role carries the shipped rules once the aggregation controller folds them in.
	if err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(context.Context) (bool, error) {
		return f.canI(user, "create", "celldfleets", ""), nil
	}); err != nil {
		t.Fatalf("%s bound to edit in %s may not create fleets: the aggregated rules are missing", user, f.ns)
	}
	_, c := impersonated(t, user)
	return &tenant{f: f, user: user, celld: c}
}

// fleet is a small fleet of the tenant's namespace on bucket name at endpoint ("" for Amazon S3).
func (tn *tenant) fleet(name, bucket, endpoint string) *v1alpha1.CelldFleet {
	fl := tn.f.newFleet(name, v1alpha1.ProfileBucket, 1)
	fl.Namespace = tn.f.ns
	fl.Spec.Bucket = v1alpha1.BucketSpec{Name: bucket, Region: "us-east-1", Endpoint: endpoint}
	return fl
}

// create creates the fleet as the tenant (dryRun: only asks admission) and returns the refusal.
func (tn *tenant) create(t *testing.T, fl *v1alpha1.CelldFleet, dryRun bool) error {
	t.Helper()
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err := tn.celld.CelldV1alpha1().CelldFleets(fl.Namespace).Create(tn.f.ctx, fl, opts)
	if err == nil && !dryRun {
		t.Cleanup(func() {
			tn.f.dumpIfFailed()
			tn.f.deleteFleet(fl.Name, false)
		})
	}
	return err
}

// TestBucketPolicyTenancy: two tenants bound to the built-in edit role, each in a namespace of its
// own, and fleets on a real API server.
//
// Without a CelldBucketPolicy the first tenant's fleet reserves a bucket and the second tenant's
// fleet naming it is refused by the reservation, as before: its status and Events say that the
// bucket is reserved in another namespace and to ask the cluster administrator, and name nothing
// of the other namespace (not its name, the fleet's name or its UID).
//
// With deploy/'s admission policy and a CelldBucketPolicy per tenant (one selecting its namespace
// by name, one by labels), each tenant creates fleets on its own buckets, spelled as it likes, and
// is refused the other's at admission, with a message naming the bucket and the policy; a namespace
// where no operator runs is refused the same way, and a label added to it lets it in. The API
// server compiled and type-checked the policy's CEL: it holds no warning, and a broken copy is
// refused.
func TestBucketPolicyTenancy(t *testing.T) {
	t.Parallel()
	installDeploy(t, "rbac/aggregate_view.yaml", "rbac/aggregate_edit.yaml", "rbac/bucket_policy.yaml")
	fa, fb, fc := newFixture(t), newFixture(t), newFixture(t)
	alice, bob := newTenant(t, fa, "alice"), newTenant(t, fb, "bob")
	fa.startOperator()
	fb.startOperator()

	// --- Without a policy: the reservation refuses, and discloses nothing across namespaces. -----
	shared := "shared-" + fa.id
	holder := alice.fleet("holder-"+fa.id, shared, "")
	if err := alice.create(t, holder, false); err != nil {
		t.Fatalf("%s creates fleet %s with no policy installed: %v", alice.user, holder.Name, err)
	}
	held := fa.waitFleet(holder.Name, converge, "ReservationBound", func(fl *v1alpha1.CelldFleet) bool {
		return meta.IsStatusConditionTrue(fl.Status.Conditions, v1alpha1.ConditionReservationBound)
	})
	// Another spelling of the same bucket: the reservation is by canonical identity.
	late := bob.fleet("late", shared, "https://S3.EU-WEST-1.amazonaws.com:443/")
	if err := bob.create(t, late, false); err != nil {
		t.Fatalf("%s creates fleet %s with no policy installed: %v", bob.user, late.Name, err)
	}
	refused := fb.waitFleet(late.Name, converge, "Degraded=True BucketReserved", func(fl *v1alpha1.CelldFleet) bool {
		c := meta.FindStatusCondition(fl.Status.Conditions, v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == machine.ReasonBucketReserved
	})
	secrets := []string{fa.ns, held.Name, string(held.UID)}
	var said []string
	for _, c := range refused.Status.Conditions {
		said = append(said, "condition "+c.Type+": "+c.Message)
	}
	if c := condition(refused, v1alpha1.ConditionDegraded); !strings.Contains(c.Message, "another namespace") || !strings.Contains(c.Message, "cluster administrator") {
		t.Errorf("Degraded does not say the bucket is reserved elsewhere and whom to ask: %s", c.Message)
	}
	// The tenant reads its namespace's Events itself.
	bobKube, _ := impersonated(t, bob.user)
	var warned bool
	if err := wait.PollUntilContextTimeout(fb.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		evs, err := bobKube.CoreV1().Events(fb.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		said, warned = said[:len(refused.Status.Conditions)], false
		for _, ev := range evs.Items {
			said = append(said, "Event "+ev.Reason+" of "+ev.InvolvedObject.Name+": "+ev.Message)
			warned = warned || (ev.Reason == machine.ReasonBucketReserved && ev.InvolvedObject.Name == late.Name)
		}
		return warned, nil
	}); err != nil {
		t.Errorf("%s reads no BucketReserved Event of fleet %s: %v", bob.user, late.Name, err)
	}
	for _, s := range said {
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				t.Errorf("%s reads %q of namespace %s in %s", bob.user, secret, fa.ns, s)
			}
		}
	}
	t.Logf("refused by the reservation: %s", condition(refused, v1alpha1.ConditionDegraded).Message)

	// --- With the policy: the API server refuses at admission. -----------------------------------
	// A test that uninstalls the release may have taken the CRD away since TestMain installed it.
	if err := suite.cp.InstallCRDs(fa.ctx); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(fa.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		crd, err := suite.kube.Discovery().ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String())
		if err != nil {
			return false, nil
		}
		for _, r := range crd.APIResources {
			if r.Name == "celldbucketpolicies" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal("the API server does not serve celldbucketpolicies (deploy/crds)")
	}
	checkPolicyCompiled(t, fa)
	run := "tenancy.e2e.celld.io/run"
	bindBucketPolicy(t, fa, run, fa.ns, fb.ns, fc.ns)
	teamLabel := "tenancy.e2e.celld.io/team"
	policies := suite.celld.CelldV1alpha1().CelldBucketPolicies()
	for _, p := range []*v1alpha1.CelldBucketPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "alice-" + fa.id, Labels: map[string]string{run: fa.id}},
			Spec: v1alpha1.CelldBucketPolicySpec{
				Namespaces: v1alpha1.NamespaceSelection{Names: []string{fa.ns}},
				Buckets:    []v1alpha1.BucketGrant{{Name: "a-*-" + fa.id}, {Name: shared, Store: "s3.amazonaws.com"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bob-" + fa.id, Labels: map[string]string{run: fa.id}},
			Spec: v1alpha1.CelldBucketPolicySpec{
				Namespaces: v1alpha1.NamespaceSelection{Selector: &v1alpha1.NamespaceLabelSelector{
					MatchLabels:      map[string]string{teamLabel: "bob-" + fa.id},
					MatchExpressions: []v1alpha1.NamespaceSelectorRequirement{{Key: testLabel, Operator: "Exists"}}}},
				Buckets: []v1alpha1.BucketGrant{{Name: "b-*-" + fa.id, Store: "minio.example.com"}}}},
	} {
		if _, err := policies.Create(fa.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create CelldBucketPolicy %s: %v", p.Name, err)
		}
		t.Cleanup(func() { _ = policies.Delete(context.Background(), p.Name, metav1.DeleteOptions{}) })
	}
	labelNamespace(t, fb, teamLabel, "bob-"+fa.id)

	// The API server loads policies, bindings and parameters asynchronously.
	probe := alice.fleet("probe", "b-probe-"+fa.id, "https://minio.example.com")
	if err := wait.PollUntilContextTimeout(fa.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		return alice.create(t, probe, true) != nil, nil
	}); err != nil {
		t.Fatalf("the bucket policy never refused %s a bucket of %s", alice.user, bob.user)
	}

	mine, theirs := "a-data-"+fa.id, "b-data-"+fa.id
	for _, c := range []struct {
		what     string
		who      *tenant
		fl       *v1alpha1.CelldFleet
		dryRun   bool
		policy   string // the policy the refusal names ("" when either may refuse, or when admitted)
		notNamed string // the other tenant's namespace, which a refusal must not name; "" when admitted
	}{
		{"alice, her pattern, Amazon", alice, alice.fleet("mine", mine, ""), false, "", ""},
		{"alice, her pattern, any store", alice, alice.fleet("mine-minio", mine, "https://minio.example.com"), true, "", ""},
		{"alice, the shared bucket spelled another way", alice, alice.fleet("shared-too", shared, "https://s3.dualstack.eu-west-1.amazonaws.com"), true, "", ""},
		{"alice, the shared bucket on another store", alice, alice.fleet("shared-minio", shared, "https://minio.example.com"), true, "alice-" + fa.id, fb.ns},
		{"alice, bob's bucket", alice, alice.fleet("theirs", theirs, "https://minio.example.com"), true, "", fb.ns},
		{"alice, a bucket no policy lists", alice, alice.fleet("free", "free-"+fa.id, ""), true, "alice-" + fa.id, fb.ns},
		{"bob, his bucket spelled as a host with case, port, dot and path", bob, bob.fleet("mine", theirs, "HTTPS://MinIO.Example.COM.:9000/celld/"), false, "", ""},
		{"bob, his bucket virtual-host style", bob, bob.fleet("mine-vhost", theirs, "http://"+theirs+".minio.example.com"), true, "", ""},
		{"bob, his bucket's name on Amazon", bob, bob.fleet("amazon", theirs, ""), true, "bob-" + fa.id, fa.ns},
		// Both policies refuse it (the bucket is alice's; bob's namespace may use only his), and
		// the API server names the first parameter it evaluates, in no fixed order.
		{"bob, alice's bucket", bob, bob.fleet("hers", mine, ""), true, "", fa.ns},
		{"bob, the bucket alice holds, spelled another way", bob, bob.fleet("shared", shared, "https://s3.amazonaws.com/"+shared), true, "", fa.ns},
	} {
		err := c.who.create(t, c.fl, c.dryRun)
		switch admitted := c.notNamed == ""; {
		case admitted:
			if err != nil {
				t.Errorf("%s: refused: %v", c.what, err)
			}
			continue
		case err == nil:
			t.Errorf("%s: admitted; want refused at admission", c.what)
			continue
		case !apierrors.IsForbidden(err):
			t.Errorf("%s: refused, but not by admission: %v", c.what, err)
		}
		msg := err.Error()
		for _, want := range []string{"bucket " + c.fl.Spec.Bucket.Name + " ", "CelldBucketPolicy " + c.policy, "cluster administrator"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: the refusal does not say %q: %s", c.what, want, msg)
			}
		}
		if strings.Contains(msg, c.notNamed) {
			t.Errorf("%s: the refusal names namespace %s: %s", c.what, c.notNamed, msg)
		}
	}
	for _, tf := range []struct {
		f  *fixture
		fl string
	}{{fa, "mine"}, {fb, "mine"}} {
		tf.f.waitFleet(tf.fl, converge, "ReservationBound", func(fl *v1alpha1.CelldFleet) bool {
			return meta.IsStatusConditionTrue(fl.Status.Conditions, v1alpha1.ConditionReservationBound)
		})
	}

	// A namespace where no operator runs: the API server alone decides, by the namespace's labels.
	other := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: fc.ns}, Spec: bob.fleet("x", theirs, "https://minio.example.com").Spec}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := suite.celld.CelldV1alpha1().CelldFleets(fc.ns).Create(fc.ctx, other, dry); err == nil || !strings.Contains(err.Error(), "CelldBucketPolicy bob-"+fa.id) {
		t.Errorf("a namespace bob's policy does not select creates a fleet on his bucket: %v", err)
	} else if strings.Contains(err.Error(), fb.ns) {
		t.Errorf("the refusal names bob's namespace: %v", err)
	}
	labelNamespace(t, fc, teamLabel, "bob-"+fa.id)
	if err := wait.PollUntilContextTimeout(fc.ctx, poll, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := suite.celld.CelldV1alpha1().CelldFleets(fc.ns).Create(ctx, other, dry)
		return err == nil, nil
	}); err != nil {
		t.Errorf("a namespace labelled as bob's is still refused his bucket")
	}
}

// labelNamespace adds a label to the fixture's namespace.
func labelNamespace(t *testing.T, f *fixture, key, value string) {
	t.Helper()
	patch := []byte(`{"metadata":{"labels":{"` + key + `":"` + value + `"}}}`)
	if _, err := suite.kube.CoreV1().Namespaces().Patch(f.ctx, f.ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bindBucketPolicy binds the shipped policy as the shipped binding does, but only to this test's
// namespaces and CelldBucketPolicies (labelled run=id): the other tests' fleets run beside it.
func bindBucketPolicy(t *testing.T, f *fixture, runLabel string, namespaces ...string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(suite.root, "deploy", "rbac", "bucket_policy_binding.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict(data, b); err != nil {
		t.Fatalf("deploy/rbac/bucket_policy_binding.yaml: %v", err)
	}
	b.Name += "-" + f.id
	b.Labels = map[string]string{testLabel: "true"}
	b.Spec.ParamRef.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{runLabel: f.id}}
	b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: namespaces}}}}
	client := suite.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if _, err := client.Create(f.ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind the bucket policy: %v", err)
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), b.Name, metav1.DeleteOptions{}) })
}

// checkPolicyCompiled: the API server compiled the shipped policy and type-checked it against the
// CelldFleet and CelldBucketPolicy schemas without a warning, and it refuses a policy whose CEL
// does not compile.
func checkPolicyCompiled(t *testing.T, f *fixture) {
	t.Helper()
	vaps := suite.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	var vap *admissionregistrationv1.ValidatingAdmissionPolicy
	if err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		vap, err = vaps.Get(ctx, "celld-bucket-policy", metav1.GetOptions{})
		return err == nil && vap.Status.ObservedGeneration == vap.Generation && vap.Status.TypeChecking != nil, nil
	}); err != nil {
		t.Fatalf("the API server never type-checked celld-bucket-policy: %v", err)
	}
	if w := vap.Status.TypeChecking.ExpressionWarnings; len(w) > 0 {
		t.Errorf("the API server's type check of deploy/rbac/bucket_policy.yaml warns: %+v", w)
	}
	for _, c := range vap.Status.Conditions {
		if c.Status == metav1.ConditionFalse {
			t.Errorf("celld-bucket-policy condition %s=False: %s", c.Type, c.Message)
		}
	}
	broken := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "celld-bucket-policy-broken-" + f.id}, Spec: *vap.Spec.DeepCopy()}
	broken.Spec.Variables[len(broken.Spec.Variables)-1].Expression = "variables.byName.exists(g, g.store ==)"
	_, err := vaps.Create(f.ctx, broken, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "compil") {
		t.Errorf("a policy whose CEL does not compile: %v, want refused as invalid", err)
	}
}
