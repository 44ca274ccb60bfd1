package deploy_test

import (
	"context"
	"reflect"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/deploy/rbac"
	"github.com/celld/celld-operator/render"
)

// readinessDefault is deploy/rbac/readiness_default.yaml compiled as the API server's mutating
// admission plugin compiles it (k8s.io/apiserver's CEL composition, its match-condition matcher
// and its apply-configuration patcher). The e2e test TestReadinessDefaultOnCreate runs the same
// file in a real API server.
type readinessDefault struct {
	spec     admissionregistrationv1.MutatingAdmissionPolicySpec
	matcher  matchconditions.Matcher
	patchers []patch.Patcher
}

func loadReadinessDefault(t *testing.T) *readinessDefault {
	t.Helper()
	var map_ admissionregistrationv1.MutatingAdmissionPolicy
	if err := yaml.UnmarshalStrict(rbac.ReadinessDefault, &map_); err != nil {
		t.Fatalf("rbac/readiness_default.yaml: %v", err)
	}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		t.Fatal(err)
	}
	opts := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	p := &readinessDefault{spec: map_.Spec}
	var conds []plugincel.ExpressionAccessor
	for i := range map_.Spec.MatchConditions {
		conds = append(conds, (*matchconditions.MatchCondition)(&map_.Spec.MatchConditions[i]))
	}
	p.matcher = matchconditions.NewMatcher(compiler.CompileCondition(conds, opts, environment.StoredExpressions),
		map_.Spec.FailurePolicy, "policy", "mutate", map_.Name)
	patchOpts := opts
	patchOpts.HasPatchTypes = true
	for _, m := range map_.Spec.Mutations {
		if m.PatchType != admissionregistrationv1.PatchTypeApplyConfiguration || m.ApplyConfiguration == nil {
			t.Fatalf("mutation %+v: only apply configurations are expected", m)
		}
		p.patchers = append(p.patchers, patch.NewApplyConfigurationPatcher(compiler.CompileMutatingEvaluator(
			&patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}, patchOpts, environment.StoredExpressions)))
	}
	return p
}

var fleets = v1alpha1.SchemeGroupVersion.WithResource("celldfleets")

func fleetRequest(op admission.Operation, subresource string, obj, old runtime.Object) admission.Attributes {
	var opts runtime.Object = &metav1.UpdateOptions{}
	if op == admission.Create {
		opts = &metav1.CreateOptions{}
	}
	return admission.NewAttributesRecord(obj, old, v1alpha1.SchemeGroupVersion.WithKind("CelldFleet"), "team-a", "f",
		fleets, subresource, op, opts, false, &user.DefaultInfo{Name: "tenant"})
}

func (p *readinessDefault) matchesResource(attrs admission.Attributes) bool {
	for _, r := range p.spec.MatchConstraints.ResourceRules {
		if (&rules.Matcher{Rule: r.RuleWithOperations, Attr: attrs}).Matches() {
			return true
		}
	}
	return false
}

// admit is the object as the policy leaves it.
func (p *readinessDefault) admit(t *testing.T, attrs admission.Attributes) *v1alpha1.CelldFleet {
	t.Helper()
	obj := attrs.GetObject()
	if p.matchesResource(attrs) {
		versioned := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: attrs.GetKind(),
			VersionedObject: admission.NewLazyObject(obj), VersionedOldObject: admission.NewLazyObject(attrs.GetOldObject())}
		match := p.matcher.Match(context.Background(), versioned, nil, allowAll{})
		if match.Error != nil {
			t.Fatalf("match condition: %v", match.Error)
		}
		if match.Matches {
			for _, pt := range p.patchers {
				// The API server converts a custom resource by its schema; a converter deduced
				// from the object merges the same way for the fields set here (maps by key).
				out, err := pt.Patch(context.Background(), patch.Request{MatchedResource: fleets, VersionedAttributes: versioned,
					ObjectInterfaces: admission.NewObjectInterfacesFromScheme(runtime.NewScheme()),
					TypeConverter:    managedfields.NewDeducedTypeConverter()}, celconfig.RuntimeCELCostBudget)
				if err != nil {
					t.Fatalf("the policy failed to apply: %v", err)
				}
				obj = out
				versioned.VersionedObject = admission.NewLazyObject(obj)
			}
		}
	}
	var f v1alpha1.CelldFleet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, &f); err != nil {
		t.Fatal(err)
	}
	return &f
}

func fleetObject(t *testing.T, readiness *v1alpha1.ReadinessSpec) *unstructured.Unstructured {
	t.Helper()
	f := &v1alpha1.CelldFleet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "celld.io/v1alpha1", Kind: "CelldFleet"},
		ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "team-a"},
		Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfilePersistentFleet, Members: 3,
			Readiness: readiness},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(f)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: u}
}

// TestReadinessDefaultOnCreate: a fleet created without spec.readiness gets the timing
// docs/node-maintenance.md states (a window of 7 s where Kubernetes' is 31 s), and nothing else of
// it changes; a fleet that names any of it keeps what it names, unset fields included.
func TestReadinessDefaultOnCreate(t *testing.T) {
	p := loadReadinessDefault(t)
	got := p.admit(t, fleetRequest(admission.Create, "", fleetObject(t, nil), nil))
	want := &v1alpha1.ReadinessSpec{PeriodSeconds: ptr.To[int32](2), FailureThreshold: ptr.To[int32](3), TimeoutSeconds: ptr.To[int32](1)}
	if !reflect.DeepEqual(got.Spec.Readiness, want) {
		t.Fatalf("a fleet created without spec.readiness got %+v, want %+v", got.Spec.Readiness, want)
	}
	if got.Spec.Profile != v1alpha1.ProfilePersistentFleet || got.Spec.Members != 3 || got.Name != "f" {
		t.Errorf("the policy changed more than spec.readiness: %+v", got)
	}
	// The members' probe, as the operator renders it from the defaulted fleet.
	if w := render.ReadinessWindow(probeOf(t, got)); w != 7 {
		t.Errorf("the default's window is %d s, docs/node-maintenance.md says 7 s", w)
	}
	for _, named := range []*v1alpha1.ReadinessSpec{
		{PeriodSeconds: ptr.To[int32](5)},
		{TimeoutSeconds: ptr.To[int32](3)},
		{},
	} {
		got := p.admit(t, fleetRequest(admission.Create, "", fleetObject(t, named), nil))
		if !reflect.DeepEqual(got.Spec.Readiness, named) {
			t.Errorf("a fleet created with spec.readiness %+v got %+v: what a person names is theirs", named, got.Spec.Readiness)
		}
	}
}

// TestReadinessDefaultOnlyOnCreate: a fleet that exists is never given the default, whatever
// writes it (an edit, the operator's status, a storage migration's rewrite): its members' probe,
// and so their Pods, stay as they are across an upgrade of the operator that installs the policy.
func TestReadinessDefaultOnlyOnCreate(t *testing.T) {
	p := loadReadinessDefault(t)
	if p.spec.FailurePolicy == nil || *p.spec.FailurePolicy != admissionregistrationv1.Ignore {
		t.Error("failurePolicy must be Ignore: a fleet the default cannot be applied to is still created, on Kubernetes' timing")
	}
	if p.spec.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy {
		t.Error("reinvocationPolicy must be Never")
	}
	old := fleetObject(t, nil)
	for _, c := range []struct {
		op          admission.Operation
		subresource string
	}{{admission.Update, ""}, {admission.Update, "status"}, {admission.Delete, ""}} {
		var prev runtime.Object
		if c.op != admission.Create {
			prev = old
		}
		attrs := fleetRequest(c.op, c.subresource, fleetObject(t, nil), prev)
		if p.matchesResource(attrs) {
			t.Errorf("%s celldfleets/%s: the policy applies; a fleet that exists would get a new probe and restart its members", c.op, c.subresource)
		}
		if got := p.admit(t, attrs); got.Spec.Readiness != nil {
			t.Errorf("%s celldfleets/%s: spec.readiness became %+v", c.op, c.subresource, got.Spec.Readiness)
		}
	}
	for _, other := range []string{"celldreservations", "celldbucketpolicies"} {
		attrs := admission.NewAttributesRecord(fleetObject(t, nil), nil, v1alpha1.SchemeGroupVersion.WithKind("CelldFleet"), "team-a", "f",
			v1alpha1.SchemeGroupVersion.WithResource(other), "", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "tenant"})
		if p.matchesResource(attrs) {
			t.Errorf("the policy applies to %s", other)
		}
	}
}

func probeOf(t *testing.T, f *v1alpha1.CelldFleet) *corev1.Probe {
	t.Helper()
	f.UID = "u1"
	sets := render.OfType[*appsv1.StatefulSet](render.Render(f, 3, 3))
	if len(sets) != 1 {
		t.Fatalf("%d StatefulSets rendered, want 1", len(sets))
	}
	return sets[0].Spec.Template.Spec.Containers[0].ReadinessProbe
}
