package v1alpha1

import (
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestCelldBucketPolicyCRD: the policy is cluster-scoped (an administrator's, over every
// namespace) and in no category: tenants cannot list it, and kubectl get celld would fail for them
// if it were in theirs.
func TestCelldBucketPolicyCRD(t *testing.T) {
	crd := loadCRD(t, "celld.io_celldbucketpolicies.yaml")
	v := onlyVersion(t, crd)
	if crd.Name != "celldbucketpolicies."+GroupName || crd.Spec.Names.Kind != "CelldBucketPolicy" {
		t.Errorf("name %s, kind %s", crd.Name, crd.Spec.Names.Kind)
	}
	if crd.Spec.Scope != apiextensionsv1.ClusterScoped {
		t.Errorf("scope %s, want Cluster", crd.Spec.Scope)
	}
	if !slices.Equal(crd.Spec.Names.ShortNames, []string{"cbp"}) || len(crd.Spec.Names.Categories) != 0 {
		t.Errorf("short names %v, categories %v: want cbp and none", crd.Spec.Names.ShortNames, crd.Spec.Names.Categories)
	}
	// No status: the policy is the administrator's word, nothing observes it. checkDescriptions
	// wants one, so the walk is called directly.
	root := v.Schema.OpenAPIV3Schema
	if _, ok := root.Properties["status"]; ok || strings.TrimSpace(root.Description) == "" {
		t.Errorf("a status, or no description of the kind")
	}
	count := 0
	if missing := undescribed("", root, &count); count < 10 || len(missing) > 0 {
		t.Errorf("%d properties walked, without a description: %v", count, missing)
	}
}
