package v1alpha1

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

// crdDir holds the CRDs controller-gen writes (hack/update-codegen.sh).
const crdDir = "../../deploy/crds"

func loadCRD(t *testing.T, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(crdDir, file))
	if err != nil {
		t.Fatalf("read CRD (run hack/update-codegen.sh): %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("parse %s as apiextensions.k8s.io/v1 CustomResourceDefinition: %v", file, err)
	}
	if crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition" {
		t.Fatalf("%s: got %s %s, want apiextensions.k8s.io/v1 CustomResourceDefinition", file, crd.APIVersion, crd.Kind)
	}
	return crd
}

// onlyVersion returns the v1alpha1 version of a CRD, after checking the CRD's versions: v1alpha1
// served, and v1beta1 served and stored, the same as v1alpha1 but for its name, so that the API
// server's conversion between them (strategy None: apiVersion alone changes) loses nothing.
func onlyVersion(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionVersion {
	t.Helper()
	if len(crd.Spec.Versions) != 2 {
		t.Fatalf("%s: %d versions, want v1alpha1 and v1beta1", crd.Name, len(crd.Spec.Versions))
	}
	alpha, beta := &crd.Spec.Versions[0], &crd.Spec.Versions[1]
	if alpha.Name != SchemeGroupVersion.Version || !alpha.Served || alpha.Storage {
		t.Fatalf("%s: version %q served=%v storage=%v, want %q served and not stored", crd.Name, alpha.Name, alpha.Served, alpha.Storage, SchemeGroupVersion.Version)
	}
	if beta.Name != "v1beta1" || !beta.Served || !beta.Storage {
		t.Fatalf("%s: version %q served=%v storage=%v, want v1beta1 served and stored", crd.Name, beta.Name, beta.Served, beta.Storage)
	}
	same := beta.DeepCopy()
	same.Name, same.Storage = alpha.Name, alpha.Storage
	if !equality.Semantic.DeepEqual(same, alpha) {
		t.Fatalf("%s: v1beta1 differs from v1alpha1 beyond its name: the API server would convert between them losing what differs", crd.Name)
	}
	if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Fatalf("%s: conversion %s, want None: the versions have one schema", crd.Name, crd.Spec.Conversion.Strategy)
	}
	if alpha.Schema == nil || alpha.Schema.OpenAPIV3Schema == nil {
		t.Fatalf("%s: version %s has no openAPIV3Schema", crd.Name, alpha.Name)
	}
	return alpha
}

func checkNames(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, kind, plural string, shortNames ...string) {
	t.Helper()
	if crd.Spec.Group != GroupName {
		t.Errorf("group = %q, want %q", crd.Spec.Group, GroupName)
	}
	if crd.Name != plural+"."+GroupName {
		t.Errorf("name = %q, want %q", crd.Name, plural+"."+GroupName)
	}
	if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("scope = %q, want Namespaced", crd.Spec.Scope)
	}
	if crd.Spec.Names.Kind != kind || crd.Spec.Names.Plural != plural {
		t.Errorf("names = %s/%s, want %s/%s", crd.Spec.Names.Kind, crd.Spec.Names.Plural, kind, plural)
	}
	// Exactly these: a short name another project owns (cert-manager's "cr") shadows it in kubectl.
	if !slices.Equal(crd.Spec.Names.ShortNames, shortNames) {
		t.Errorf("short names %v, want %v", crd.Spec.Names.ShortNames, shortNames)
	}
	if !slices.Contains(crd.Spec.Names.Categories, "celld") {
		t.Errorf("categories %v lack %q", crd.Spec.Names.Categories, "celld")
	}
}

// checkColumns asserts the printer columns include want, in this order.
func checkColumns(t *testing.T, v *apiextensionsv1.CustomResourceDefinitionVersion, want ...string) {
	t.Helper()
	var got []string
	for _, c := range v.AdditionalPrinterColumns {
		got = append(got, c.Name)
	}
	i := 0
	for _, name := range got {
		if i < len(want) && name == want[i] {
			i++
		}
	}
	if i != len(want) {
		t.Errorf("printer columns %v, want %v among them in this order", got, want)
	}
}

// undescribed returns the path of every property below s that has no description.
// The metadata property of the root object is skipped: the API server owns its schema.
func undescribed(path string, s *apiextensionsv1.JSONSchemaProps, count *int) []string {
	if s == nil {
		return nil
	}
	var missing []string
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if path == "" && name == "metadata" {
			continue
		}
		p := s.Properties[name]
		child := name
		if path != "" {
			child = path + "." + name
		}
		*count++
		if strings.TrimSpace(p.Description) == "" {
			missing = append(missing, child)
		}
		missing = append(missing, undescribed(child, &p, count)...)
	}
	if s.Items != nil {
		missing = append(missing, undescribed(path+"[]", s.Items.Schema, count)...)
		for i := range s.Items.JSONSchemas {
			missing = append(missing, undescribed(path+"[]", &s.Items.JSONSchemas[i], count)...)
		}
	}
	if s.AdditionalProperties != nil {
		missing = append(missing, undescribed(path+"{}", s.AdditionalProperties.Schema, count)...)
	}
	for _, group := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range group {
			missing = append(missing, undescribed(path, &group[i], count)...)
		}
	}
	missing = append(missing, undescribed(path, s.Not, count)...)
	return missing
}

// checkDescriptions makes `kubectl explain` read well: every property has a description.
func checkDescriptions(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, v *apiextensionsv1.CustomResourceDefinitionVersion) {
	t.Helper()
	root := v.Schema.OpenAPIV3Schema
	if strings.TrimSpace(root.Description) == "" {
		t.Errorf("%s: the root schema has no description (the type's Go doc comment)", crd.Name)
	}
	for _, top := range []string{"spec", "status"} {
		if _, ok := root.Properties[top]; !ok {
			t.Errorf("%s: schema has no %s", crd.Name, top)
		}
	}
	count := 0
	missing := undescribed("", root, &count)
	if count < 10 {
		t.Fatalf("%s: walked only %d properties; the schema walk is broken", crd.Name, count)
	}
	if len(missing) > 0 {
		t.Errorf("%s: %d of %d properties have no description; write a Go doc comment on the field in api/v1alpha1 and run hack/update-codegen.sh:\n  %s",
			crd.Name, len(missing), count, strings.Join(missing, "\n  "))
	}
}

func TestCelldFleetCRD(t *testing.T) {
	crd := loadCRD(t, "celld.io_celldfleets.yaml")
	v := onlyVersion(t, crd)
	checkNames(t, crd, "CelldFleet", "celldfleets", "cf")

	sub := v.Subresources
	if sub == nil || sub.Status == nil {
		t.Fatalf("status subresource missing")
	}
	if sub.Scale == nil {
		t.Fatalf("scale subresource missing")
	}
	if got, want := sub.Scale.SpecReplicasPath, ".spec.members"; got != want {
		t.Errorf("scale specReplicasPath = %q, want %q", got, want)
	}
	if got, want := sub.Scale.StatusReplicasPath, ".status.members.current"; got != want {
		t.Errorf("scale statusReplicasPath = %q, want %q", got, want)
	}
	if sub.Scale.LabelSelectorPath == nil || *sub.Scale.LabelSelectorPath != ".status.selector" {
		t.Errorf("scale labelSelectorPath = %v, want .status.selector", sub.Scale.LabelSelectorPath)
	}

	checkColumns(t, v, "Profile", "Desired", "Ready", "State", "Image", "Updated", "Blocked-By", "Age")
	for _, c := range v.AdditionalPrinterColumns {
		// Desired is the size decided on, which differs from spec.members in Auto mode; Image,
		// Updated and Blocked-By are for -o wide.
		want := map[string]string{"Desired": ".status.members.desired", "Image": ".spec.image", "Updated": ".status.members.updated"}[c.Name]
		if want != "" && c.JSONPath != want {
			t.Errorf("column %s shows %s, want %s", c.Name, c.JSONPath, want)
		}
		if wide := c.Name == "Image" || c.Name == "Updated" || c.Name == "Blocked-By"; wide != (c.Priority > 0) {
			t.Errorf("column %s priority %d: wide-only is %t", c.Name, c.Priority, wide)
		}
	}
	checkDescriptions(t, crd, v)
}

func TestCelldReservationCRD(t *testing.T) {
	crd := loadCRD(t, "celld.io_celldreservations.yaml")
	v := onlyVersion(t, crd)
	checkNames(t, crd, "CelldReservation", "celldreservations", "cres")

	sub := v.Subresources
	if sub == nil || sub.Status == nil {
		t.Fatalf("status subresource missing")
	}
	if sub.Scale != nil {
		t.Errorf("CelldReservation has a scale subresource; it must not")
	}

	checkColumns(t, v, "Fleet", "Bucket", "Profile", "Age")
	checkDescriptions(t, crd, v)
}
