package deploy_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
	"pgregory.net/rapid"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/deploy/rbac"
	"github.com/celld/celld-operator/reservation"
)

// bucketPolicy is deploy/rbac/bucket_policy.yaml compiled and evaluated as the API server's
// validating admission plugin does (k8s.io/apiserver's CEL composition: the same environment,
// variables, declarations and cost budget), so its CEL is judged here against the operator's own
// code, in milliseconds. The e2e test TestBucketPolicyTenancy runs the same file in a real API
// server.
type bucketPolicy struct {
	spec                            admissionregistrationv1.ValidatingAdmissionPolicySpec
	validations /* and */, messages plugincel.ConditionEvaluator
}

// expression is what the CEL composition compiles: a validation (bool), a message (string) or a
// variable (anything), as the validating plugin's own accessors declare them.
type expression struct {
	name, text string
	returns    *cel.Type
}

func (e *expression) GetExpression() string { return e.text }
func (e *expression) GetName() string       { return e.name }
func (e *expression) ReturnTypes() []*cel.Type {
	if e.returns == nil {
		return []*cel.Type{cel.AnyType, cel.DynType}
	}
	return []*cel.Type{e.returns}
}

func loadBucketPolicy(t testing.TB) *bucketPolicy {
	t.Helper()
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	if err := yaml.UnmarshalStrict(rbac.BucketPolicy, &vap); err != nil {
		t.Fatalf("rbac/bucket_policy.yaml: %v", err)
	}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		t.Fatal(err)
	}
	withParams := plugincel.OptionalVariableDeclarations{HasParams: true, HasAuthorizer: true}
	var vars []plugincel.NamedExpressionAccessor
	for _, v := range vap.Spec.Variables {
		vars = append(vars, &expression{name: v.Name, text: v.Expression})
	}
	compiler.CompileAndStoreVariables(vars, withParams, environment.StoredExpressions)
	var conds, msgs []plugincel.ExpressionAccessor
	for _, v := range vap.Spec.Validations {
		conds = append(conds, &expression{text: v.Expression, returns: cel.BoolType})
		msgs = append(msgs, &expression{text: v.MessageExpression, returns: cel.StringType})
	}
	return &bucketPolicy{spec: vap.Spec,
		validations: compiler.CompileCondition(conds, withParams, environment.StoredExpressions),
		messages:    compiler.CompileCondition(msgs, plugincel.OptionalVariableDeclarations{HasParams: true}, environment.StoredExpressions),
	}
}

// policy is a CelldBucketPolicy as the API server hands it to the admission policy.
func policy(t fatalf, name string, spec v1alpha1.CelldBucketPolicySpec) runtime.Object {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.CelldBucketPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "celld.io/v1alpha1", Kind: "CelldBucketPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// fatalf is what the helpers need of a *testing.T or a *rapid.T.
type fatalf interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// allowAll stands for the authorizer: the policy asks it nothing.
type allowAll struct{}

func (allowAll) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}

// admit is the decision on creating, in namespace ns (with labels), a fleet of bucket b, under
// each of policies: "" when every one admits it, else the first refusal's message.
func (p *bucketPolicy) admit(t fatalf, ns string, labels map[string]string, b v1alpha1.BucketSpec, policies ...runtime.Object) string {
	t.Helper()
	fleet := &v1alpha1.CelldFleet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "celld.io/v1alpha1", Kind: "CelldFleet"},
		ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: ns},
		Spec:       v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfileBucket, Members: 1, Image: "celld:1", Bucket: b},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(fleet)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: u}
	gvk, gvr := v1alpha1.SchemeGroupVersion.WithKind("CelldFleet"), v1alpha1.SchemeGroupVersion.WithResource("celldfleets")
	attrs := admission.NewAttributesRecord(obj, nil, gvk, ns, "f", gvr, "", admission.Create, &metav1.CreateOptions{}, false,
		&user.DefaultInfo{Name: "tenant"})
	versioned := &admission.VersionedAttributes{Attributes: attrs, VersionedObject: admission.NewLazyObject(obj), VersionedKind: gvk}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}
	request := plugincel.CreateAdmissionRequest(attrs, metav1.GroupVersionResource(gvr), metav1.GroupVersionKind(gvk))
	nsObj := plugincel.CreateNamespaceObject(namespace)
	for _, params := range policies {
		vars := plugincel.OptionalVariableBindings{VersionedParams: params, Authorizer: allowAll{}}
		results, budget, err := p.validations.ForInput(context.Background(), versioned, request, vars, nsObj, celconfig.RuntimeCELCostBudget)
		if err != nil {
			t.Fatalf("the admission policy failed to evaluate (%+v in %s): %v", b, ns, err)
		}
		messages, _, err := p.messages.ForInput(context.Background(), versioned, request, plugincel.OptionalVariableBindings{VersionedParams: params}, nsObj, budget)
		if err != nil {
			t.Fatalf("the admission policy's messages failed to evaluate (%+v in %s): %v", b, ns, err)
		}
		for i, r := range results {
			if r.Error != nil {
				t.Fatalf("validation %d failed to evaluate (%+v in %s): %v", i, b, ns, r.Error)
			}
			if r.EvalResult != celtypes.True {
				if messages[i].Error != nil {
					t.Fatalf("message %d failed to evaluate (%+v in %s): %v", i, b, ns, messages[i].Error)
				}
				msg := messages[i].EvalResult.Value().(string)
				if strings.ContainsAny(msg, "\n") || len(msg) > celconfig.MaxEvaluatedMessageExpressionSizeBytes {
					t.Fatalf("the API server would drop message %d, multi-line or too long: %q", i, msg)
				}
				return msg
			}
		}
	}
	return ""
}

// TestBucketPolicyShape: the shipped policy matches what tenants create and nothing the operator
// must keep doing to existing fleets, and its binding leaves a cluster without CelldBucketPolicy
// as it was.
func TestBucketPolicyShape(t *testing.T) {
	p := loadBucketPolicy(t)
	if p.spec.ParamKind == nil || p.spec.ParamKind.Kind != "CelldBucketPolicy" || p.spec.ParamKind.APIVersion != "celld.io/v1alpha1" {
		t.Errorf("paramKind %+v, want celld.io/v1alpha1 CelldBucketPolicy", p.spec.ParamKind)
	}
	if p.spec.FailurePolicy == nil || *p.spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Error("failurePolicy must be Fail: an error must not let a tenant take a kept bucket")
	}
	rules := p.spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || fmt.Sprint(rules[0].Operations) != "[CREATE]" || fmt.Sprint(rules[0].Resources) != "[celldfleets]" {
		t.Errorf("match %+v: want CREATE of celldfleets alone (the bucket is immutable; updates carry finalizers)", rules)
	}
	data, err := os.ReadFile("rbac/bucket_policy_binding.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict(data, &b); err != nil {
		t.Fatal(err)
	}
	ref := b.Spec.ParamRef
	if ref == nil || ref.Selector == nil || len(ref.Selector.MatchLabels)+len(ref.Selector.MatchExpressions) != 0 || ref.Name != "" ||
		ref.ParameterNotFoundAction == nil || *ref.ParameterNotFoundAction != admissionregistrationv1.AllowAction {
		t.Errorf("paramRef %+v: want every CelldBucketPolicy (selector {}) and Allow when there is none", ref)
	}
	if b.Spec.PolicyName != "celld-bucket-policy" || fmt.Sprint(b.Spec.ValidationActions) != "[Deny]" || b.Spec.MatchResources != nil {
		t.Errorf("binding %+v: want celld-bucket-policy, Deny, every namespace", b.Spec)
	}
}

// TestBucketPolicyAdmission: name patterns, namespaces by name and by every selector operator,
// both directions of a policy, several policies at once, and messages that name the bucket and
// the policy but no other namespace.
func TestBucketPolicyAdmission(t *testing.T) {
	p := loadBucketPolicy(t)
	minio := func(name string) v1alpha1.BucketSpec {
		return v1alpha1.BucketSpec{Name: name, Region: "us-east-1", Endpoint: "https://minio.example.com"}
	}
	amazon := func(name string) v1alpha1.BucketSpec { return v1alpha1.BucketSpec{Name: name, Region: "us-east-1"} }
	teamA := policy(t, "team-a", v1alpha1.CelldBucketPolicySpec{
		Namespaces: v1alpha1.NamespaceSelection{Names: []string{"alpha", "alpha-dev"}},
		Buckets:    []v1alpha1.BucketGrant{{Name: "a-*"}, {Name: "logs.a", Store: "minio.example.com"}},
	})
	teamB := policy(t, "team-b", v1alpha1.CelldBucketPolicySpec{
		Namespaces: v1alpha1.NamespaceSelection{Selector: &v1alpha1.NamespaceLabelSelector{
			MatchLabels: map[string]string{"team": "b"},
			MatchExpressions: []v1alpha1.NamespaceSelectorRequirement{
				{Key: "stage", Operator: "In", Values: []string{"prod", "dev"}},
				{Key: "frozen", Operator: "DoesNotExist"},
			}}},
		Buckets: []v1alpha1.BucketGrant{{Name: "b-*-data", Store: "minio.example.com"}},
	})
	sandbox := policy(t, "sandbox", v1alpha1.CelldBucketPolicySpec{
		Namespaces: v1alpha1.NamespaceSelection{Selector: &v1alpha1.NamespaceLabelSelector{
			MatchExpressions: []v1alpha1.NamespaceSelectorRequirement{
				{Key: "sandbox", Operator: "Exists"},
				{Key: "team", Operator: "NotIn", Values: []string{"a", "b"}},
			}}},
	})
	all := []runtime.Object{teamA, teamB, sandbox}
	bProd := map[string]string{"team": "b", "stage": "prod"}
	for _, c := range []struct {
		name   string
		ns     string
		labels map[string]string
		bucket v1alpha1.BucketSpec
		// refused names the policy that refuses, "" when admitted.
		refused string
	}{
		{"a pattern, any store", "alpha", nil, amazon("a-1"), ""},
		{"a pattern, another store", "alpha-dev", nil, minio("a-data"), ""},
		{"the pattern is anchored", "alpha", nil, amazon("xa-1"), "team-a"},
		{"a dot in a pattern is only a dot", "alpha", nil, minio("logsxa"), "team-a"},
		{"a name on its store", "alpha", nil, minio("logs.a"), ""},
		{"a name on another store", "alpha", nil, amazon("logs.a"), "team-a"},
		{"another team's bucket", "alpha", nil, minio("b-x-data"), "team-a"},
		{"an unlisted bucket", "alpha", nil, amazon("free"), "team-a"},
		{"a kept bucket from an unselected namespace", "gamma", nil, amazon("a-1"), "team-a"},
		{"a kept bucket from a namespace of another name", "alpha-prod", nil, amazon("a-1"), "team-a"},
		{"matchLabels and In", "beta", bProd, minio("b-x-data"), ""},
		{"In, the other value", "beta-dev", map[string]string{"team": "b", "stage": "dev"}, minio("b-y-data"), ""},
		{"In, a value not listed", "beta-qa", map[string]string{"team": "b", "stage": "qa"}, minio("b-x-data"), "team-b"},
		{"matchLabels, another value", "gamma", map[string]string{"team": "c", "stage": "prod"}, minio("b-x-data"), "team-b"},
		{"DoesNotExist", "beta-old", map[string]string{"team": "b", "stage": "prod", "frozen": "yes"}, minio("b-x-data"), "team-b"},
		{"a selected namespace, its bucket on another store", "beta", bProd, amazon("b-x-data"), "team-b"},
		{"a selected namespace, the pattern's end", "beta", bProd, minio("b-x-logs"), "team-b"},
		{"a selected namespace, another team's bucket", "beta", bProd, amazon("a-1"), "team-a"},
		{"an unselected namespace, a bucket no policy lists", "gamma", map[string]string{"team": "c"}, amazon("free"), ""},
		{"an unselected namespace, a listed name on another store", "gamma", nil, amazon("b-x-data"), ""},
		{"Exists and NotIn select: no bucket at all", "play", map[string]string{"sandbox": ""}, amazon("free"), "sandbox"},
		{"NotIn leaves a team's namespace out", "beta-play", map[string]string{"sandbox": "", "team": "b", "stage": "dev"}, minio("b-x-data"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := p.admit(t, c.ns, c.labels, c.bucket, all...)
			if c.refused == "" {
				if msg != "" {
					t.Fatalf("refused: %s", msg)
				}
				return
			}
			if msg == "" {
				t.Fatalf("admitted; want refused by CelldBucketPolicy %s", c.refused)
			}
			for _, want := range []string{"spec.bucket", "bucket " + c.bucket.Name + " ", "CelldBucketPolicy " + c.refused + " ", "cluster administrator"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the refusal does not say %q: %s", want, msg)
				}
			}
			for _, other := range []string{"alpha", "beta", "gamma", "play"} {
				if other != c.ns && strings.Contains(strings.ReplaceAll(msg, c.ns, ""), other) {
					t.Errorf("the refusal names namespace %s, not the fleet's: %s", other, msg)
				}
			}
		})
	}
}

// endpoint spells an endpoint as fleets may (the CRD admits http and https URLs with a host that
// url() parses: no fragment):
// case, ports, trailing dots and slashes, paths, user info, virtual-host-style bucket prefixes,
// Amazon's regional hosts, IP addresses in every form, internationalized names.
func endpoint(t *rapid.T, name string) string {
	host := rapid.SampledFrom([]string{
		"minio.example.com", "MinIO.Example.COM", "store_1.example", "a--b.example", "-x.example", "xn--bcher-kva.example",
		"s3.amazonaws.com", "S3.EU-WEST-1.amazonaws.com", "s3-fips.us-east-1.amazonaws.com", "s3.cn-north-1.amazonaws.com.cn",
		"amazonaws.com", "notamazonaws.com", "10.0.0.1", "[2001:DB8::1]", "[2001:db8:0:0:0:0:0:1]", "[::1]",
		"[::ffff:10.0.0.1]", "[fe80::1%25eth0]", "bücher.example", "BÜCHER.example",
	}).Draw(t, "host")
	if rapid.Bool().Draw(t, "virtual-host") && !strings.HasPrefix(host, "[") {
		host = rapid.SampledFrom([]string{name, strings.ToUpper(name)}).Draw(t, "prefix") + "." + host
	}
	if rapid.Bool().Draw(t, "trailing-dot") && !strings.HasPrefix(host, "[") {
		host += "."
	}
	return rapid.SampledFrom([]string{"https://", "http://", "HTTPS://", "Http://"}).Draw(t, "scheme") +
		rapid.SampledFrom([]string{"", "user@", "user:secret@"}).Draw(t, "userinfo") + host +
		rapid.SampledFrom([]string{"", ":443", ":80", ":9000"}).Draw(t, "port") +
		rapid.SampledFrom([]string{"", "/", "//", "/prefix/", "/" + name, "?x=1"}).Draw(t, "path")
}

// TestBucketPolicyStoreIsTheBucketsIdentity: the admission policy tells a fleet's store as the
// operator does (reservation.Store, by which it reserves buckets), whatever the spelling of the
// endpoint. A grant on that store lets the selected namespace use the bucket and keeps it from
// every other; a grant on another store does neither. A host the policy cannot bring to that form
// is never let through where it could be the kept store.
func TestBucketPolicyStoreIsTheBucketsIdentity(t *testing.T) {
	p := loadBucketPolicy(t)
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.SampledFrom([]string{"data", "my.data.v1", "100", "logs-2"}).Draw(t, "name")
		b := v1alpha1.BucketSpec{Name: name, Region: "us-east-1"}
		if rapid.IntRange(0, 9).Draw(t, "empty") > 0 {
			b.Endpoint = endpoint(t, name)
		}
		store := reservation.IdentityOf(b).Store
		ascii := !strings.ContainsAny(strings.ToLower(b.Endpoint), "üÜ%") && !strings.Contains(b.Endpoint, "ffff")
		on := func(s string) runtime.Object {
			return policy(t, "p", v1alpha1.CelldBucketPolicySpec{
				Namespaces: v1alpha1.NamespaceSelection{Names: []string{"mine"}},
				Buckets:    []v1alpha1.BucketGrant{{Name: name, Store: s}}})
		}
		same, other := on(store), on("elsewhere.example")
		if msg := p.admit(t, "mine", nil, b, same); (msg == "") != ascii {
			t.Fatalf("endpoint %q (store %s) in the granted namespace: refused %q", b.Endpoint, store, msg)
		}
		if msg := p.admit(t, "theirs", nil, b, same); msg == "" {
			t.Fatalf("endpoint %q (store %s) in another namespace: admitted, but its store is kept", b.Endpoint, store)
		}
		if msg := p.admit(t, "mine", nil, b, other); msg == "" {
			t.Fatalf("endpoint %q (store %s) in the granted namespace: admitted on a grant of elsewhere.example", b.Endpoint, store)
		}
		if msg := p.admit(t, "theirs", nil, b, other); (msg == "") != ascii {
			t.Fatalf("endpoint %q (store %s) in another namespace, a grant of elsewhere.example: refused %q", b.Endpoint, store, msg)
		}
	})
}
