package main

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/deploy/crds"
)

// admission checks a custom resource offline as the API server checks it on create, against the
// CRD the operator ships: unknown fields refused (kubectl's default, strict field validation),
// the schema's defaults applied, then the object meta, the structural schema (types, formats,
// patterns, bounds), list types and the CEL rules.
type admission struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator // nil when the schema has no rules
}

// fleetAdmission is the CelldFleet CRD's, built once.
var fleetAdmission = sync.OnceValues(func() (*admission, error) { return newAdmission(crds.CelldFleet) })

func newAdmission(data []byte) (*admission, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("the embedded CRD: %w", err)
	}
	var schema *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == v1alpha1.SchemeGroupVersion.Version && v.Schema != nil {
			schema = v.Schema.OpenAPIV3Schema
		}
	}
	if schema == nil {
		return nil, fmt.Errorf("the embedded CRD %s has no schema for %s", crd.Name, v1alpha1.SchemeGroupVersion.Version)
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(schema, internal, nil); err != nil {
		return nil, fmt.Errorf("the embedded CRD %s: %w", crd.Name, err)
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, fmt.Errorf("the embedded CRD %s is not structural: %w", crd.Name, err)
	}
	v, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, fmt.Errorf("the embedded CRD %s: %w", crd.Name, err)
	}
	return &admission{structural: s, schema: v, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}, nil
}

// admit returns the API server's refusals of obj, one per problem, as it words them, or none
// when it would store obj. obj is pruned of its status (the status subresource drops it on
// create) and defaulted in place, so it is what the API server would store.
func (a *admission) admit(obj map[string]any) []string {
	delete(obj, "status")
	// Strict field validation: an unknown field is an error, not silently dropped.
	_, _, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return []string{fmt.Sprintf("metadata: %v", err)}
	}
	unknown = append(unknown, pruning.PruneWithOptions(obj, a.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	if len(unknown) > 0 {
		out := make([]string, len(unknown))
		for i, p := range unknown {
			out[i] = fmt.Sprintf("unknown field %q", p)
		}
		return out
	}
	defaulting.Default(obj, a.structural)

	meta, _, err := schemaobjectmeta.GetObjectMeta(obj, false)
	if err != nil {
		return []string{fmt.Sprintf("metadata: %v", err)}
	}
	if meta == nil {
		meta = &metav1.ObjectMeta{}
	}
	errs := metavalidation.ValidateObjectMetaAccessor(meta, true, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, a.schema)...)
	errs = append(errs, schemaobjectmeta.Validate(context.Background(), nil, obj, a.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, a.structural, obj)...)
	if a.cel != nil {
		// As the API server: the rules are not evaluated on an object of the wrong shape.
		if blocking(errs) {
			errs = append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		} else {
			celErrs, _ := a.cel.Validate(context.Background(), nil, a.structural, obj, nil, celconfig.RuntimeCELCostBudget)
			errs = append(errs, celErrs...)
		}
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

func blocking(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}
