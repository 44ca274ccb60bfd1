package deploy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/deploy/rbac"
)

const operatorUser = "system:serviceaccount:celld-system:celld-operator"

// reservationPolicy is deploy/rbac/reservation_policy.yaml as the API server's validating
// admission plugin matches and evaluates it: its resource rules through the rule matcher the
// plugin uses, its CEL through the plugin's composition (environment, declarations, budget).
type reservationPolicy struct {
	spec                  admissionregistrationv1.ValidatingAdmissionPolicySpec
	validations, messages plugincel.ConditionEvaluator
}

func loadReservationPolicy(t *testing.T) *reservationPolicy {
	t.Helper()
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	if err := yaml.UnmarshalStrict(rbac.ReservationPolicy, &vap); err != nil {
		t.Fatalf("rbac/reservation_policy.yaml: %v", err)
	}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		t.Fatal(err)
	}
	decls := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	var conds, msgs []plugincel.ExpressionAccessor
	for _, v := range vap.Spec.Validations {
		conds = append(conds, &expression{text: v.Expression, returns: cel.BoolType})
		msgs = append(msgs, &expression{text: v.MessageExpression, returns: cel.StringType})
	}
	return &reservationPolicy{spec: vap.Spec,
		validations: compiler.CompileCondition(conds, decls, environment.StoredExpressions),
		messages:    compiler.CompileCondition(msgs, plugincel.OptionalVariableDeclarations{}, environment.StoredExpressions),
	}
}

var reservations = v1alpha1.SchemeGroupVersion.WithResource("celldreservations")

// reservationRequest is a request as the API server hands it to admission; old is nil on CREATE.
func reservationRequest(op admission.Operation, subresource, username string, obj, old runtime.Object) admission.Attributes {
	var opts runtime.Object = &metav1.UpdateOptions{}
	if op == admission.Create {
		opts = &metav1.CreateOptions{}
	}
	if op == admission.Delete {
		opts = &metav1.DeleteOptions{}
	}
	return admission.NewAttributesRecord(obj, old, v1alpha1.SchemeGroupVersion.WithKind("CelldReservation"), "", "r",
		reservations, subresource, op, opts, false, &user.DefaultInfo{Name: username})
}

// matches is whether the policy applies to the request at all.
func (p *reservationPolicy) matches(attrs admission.Attributes) bool {
	for _, r := range p.spec.MatchConstraints.ResourceRules {
		m := rules.Matcher{Rule: r.RuleWithOperations, Attr: attrs}
		if m.Matches() {
			return true
		}
	}
	return false
}

// admit is the policy's refusal of the request, "" when it lets it through (or does not apply).
func (p *reservationPolicy) admit(t *testing.T, attrs admission.Attributes) string {
	t.Helper()
	if !p.matches(attrs) {
		return ""
	}
	gvk, gvr := attrs.GetKind(), attrs.GetResource()
	versioned := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk,
		VersionedObject: admission.NewLazyObject(attrs.GetObject()), VersionedOldObject: admission.NewLazyObject(attrs.GetOldObject())}
	request := plugincel.CreateAdmissionRequest(attrs, metav1.GroupVersionResource(gvr), metav1.GroupVersionKind(gvk))
	results, budget, err := p.validations.ForInput(context.Background(), versioned, request,
		plugincel.OptionalVariableBindings{Authorizer: allowAll{}}, nil, celconfig.RuntimeCELCostBudget)
	if err != nil {
		t.Fatalf("the admission policy failed to evaluate: %v", err)
	}
	messages, _, err := p.messages.ForInput(context.Background(), versioned, request, plugincel.OptionalVariableBindings{}, nil, budget)
	if err != nil {
		t.Fatalf("the admission policy's messages failed to evaluate: %v", err)
	}
	for i, r := range results {
		if r.Error != nil {
			t.Fatalf("validation %d failed to evaluate: %v", i, r.Error)
		}
		if r.EvalResult != celtypes.True {
			if messages[i].Error != nil {
				t.Fatalf("message %d failed to evaluate: %v", i, messages[i].Error)
			}
			return messages[i].EvalResult.Value().(string)
		}
	}
	return ""
}

func reservationObject(t *testing.T, edit func(*v1alpha1.CelldReservation)) *unstructured.Unstructured {
	t.Helper()
	r := &v1alpha1.CelldReservation{
		TypeMeta:   metav1.TypeMeta{APIVersion: "celld.io/v1alpha1", Kind: "CelldReservation"},
		ObjectMeta: metav1.ObjectMeta{Name: "r", Labels: map[string]string{"app.kubernetes.io/managed-by": "celld-operator"}},
		Spec: v1alpha1.CelldReservationSpec{FleetName: "f", FleetUID: "u1", Profile: v1alpha1.ProfileBucket,
			Bucket: v1alpha1.BucketSpec{Name: "data", Region: "us-east-1"}},
		Status: v1alpha1.CelldReservationStatus{CapacityHistory: []v1alpha1.CapacityDecision{
			{Time: metav1.Unix(1e9, 0), Kind: v1alpha1.DecisionGrow, From: 0, To: 3, Source: v1alpha1.SourceManual}}},
	}
	if edit != nil {
		edit(r)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: u}
}

// TestReservationPolicyCovers: the policy applies to every create and update of a reservation,
// its status subresource included (the capacity history the step policy decides on), and to
// nothing else; deleting a reservation stays how a person releases a bucket.
func TestReservationPolicyCovers(t *testing.T) {
	p := loadReservationPolicy(t)
	if p.spec.FailurePolicy == nil || *p.spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Error("failurePolicy must be Fail: an error must not let anyone forge a reservation")
	}
	obj := reservationObject(t, nil)
	for _, c := range []struct {
		op          admission.Operation
		subresource string
		want        bool
	}{
		{admission.Create, "", true},
		{admission.Update, "", true},
		{admission.Update, "status", true},
		{admission.Delete, "", false},
	} {
		var old runtime.Object
		if c.op == admission.Update {
			old = obj
		}
		if got := p.matches(reservationRequest(c.op, c.subresource, "tenant", obj, old)); got != c.want {
			t.Errorf("%s celldreservations/%s: matched %v, want %v", c.op, c.subresource, got, c.want)
		}
	}
	for _, other := range []schema.GroupVersionResource{v1alpha1.SchemeGroupVersion.WithResource("celldfleets"),
		v1alpha1.SchemeGroupVersion.WithResource("celldbucketpolicies")} {
		attrs := admission.NewAttributesRecord(obj, nil, schema.GroupVersionKind{}, "", "r", other, "", admission.Create,
			&metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "tenant"})
		if p.matches(attrs) {
			t.Errorf("the policy applies to %s: it would refuse tenants their own objects", other.Resource)
		}
	}
}

// TestReservationPolicyAdmission: nobody but the operator creates a reservation or changes one,
// through the object or its status, cluster administrators included; an update that changes
// nothing (a storage migration's rewrite) goes through whoever sends it.
func TestReservationPolicyAdmission(t *testing.T) {
	p := loadReservationPolicy(t)
	old := reservationObject(t, nil)
	for _, c := range []struct {
		name        string
		user        string
		op          admission.Operation
		subresource string
		edit        func(*v1alpha1.CelldReservation)
		admitted    bool
	}{
		{"the operator creates", operatorUser, admission.Create, "", nil, true},
		{"the operator appends to the history", operatorUser, admission.Update, "status", func(r *v1alpha1.CelldReservation) {
			r.Status.CapacityHistory = append(r.Status.CapacityHistory, r.Status.CapacityHistory[0])
		}, true},
		{"a tenant creates", "tenant", admission.Create, "", nil, false},
		{"an administrator creates", "kubernetes-admin", admission.Create, "", nil, false},
		{"a tenant rewrites it unchanged", "tenant", admission.Update, "", nil, true},
		{"a tenant rewrites its status unchanged", "tenant", admission.Update, "status", nil, true},
		{"a tenant binds it to another fleet", "tenant", admission.Update, "", func(r *v1alpha1.CelldReservation) { r.Spec.FleetUID = "u2" }, false},
		{"a tenant moves the bucket's store", "tenant", admission.Update, "", func(r *v1alpha1.CelldReservation) {
			r.Spec.Bucket.Endpoint = "https://minio.example.com"
		}, false},
		{"a tenant appends to the history", "tenant", admission.Update, "status", func(r *v1alpha1.CelldReservation) {
			r.Status.CapacityHistory = append(r.Status.CapacityHistory, r.Status.CapacityHistory[0])
		}, false},
		{"a tenant edits the history", "tenant", admission.Update, "status", func(r *v1alpha1.CelldReservation) {
			r.Status.CapacityHistory[0].To = 1
		}, false},
		{"a tenant clears the history", "tenant", admission.Update, "status", func(r *v1alpha1.CelldReservation) {
			r.Status = v1alpha1.CelldReservationStatus{}
		}, false},
		{"a tenant changes a label", "tenant", admission.Update, "", func(r *v1alpha1.CelldReservation) {
			r.Labels["app.kubernetes.io/managed-by"] = "me"
		}, false},
		{"a tenant removes the labels", "tenant", admission.Update, "", func(r *v1alpha1.CelldReservation) { r.Labels = nil }, false},
		{"a tenant adds an annotation", "tenant", admission.Update, "", func(r *v1alpha1.CelldReservation) {
			r.Annotations = map[string]string{"a": "b"}
		}, false},
		{"a tenant gives it an owner", "tenant", admission.Update, "", func(r *v1alpha1.CelldReservation) {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "x"}}
		}, false},
		{"a tenant adds a finalizer", "tenant", admission.Update, "", func(r *v1alpha1.CelldReservation) {
			r.Finalizers = []string{"example.com/keep"}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := reservationObject(t, c.edit)
			var before runtime.Object
			if c.op == admission.Update {
				before = old
			}
			msg := p.admit(t, reservationRequest(c.op, c.subresource, c.user, obj, before))
			if c.admitted {
				if msg != "" {
					t.Fatalf("refused: %s", msg)
				}
				return
			}
			if msg == "" {
				t.Fatal("admitted; want refused")
			}
			if !strings.Contains(msg, "not by "+c.user+":") || strings.ContainsAny(msg, "\n") ||
				len(msg) > celconfig.MaxEvaluatedMessageExpressionSizeBytes {
				t.Errorf("the refusal does not name %s on one line the API server keeps: %q", c.user, msg)
			}
		})
	}
	// A finalizer removed by someone else: the reservation could go with no one releasing it.
	held := reservationObject(t, func(r *v1alpha1.CelldReservation) { r.Finalizers = []string{"example.com/keep"} })
	if msg := p.admit(t, reservationRequest(admission.Update, "", "tenant", reservationObject(t, nil), held)); msg == "" {
		t.Error("a tenant removes a finalizer: admitted; want refused")
	}
}
