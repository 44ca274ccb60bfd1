package e2e

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestReadinessDefaultOnCreate runs deploy/rbac/readiness_default.yaml in the API server, bound
// as the shipped binding binds it but to this test's namespace alone: a fleet created without
// spec.readiness gets the default timing and its members the probe it says; one that names a field
// keeps what it names; a fleet that existed before the policy keeps its members' probe across an
// edit, and no member of it is replaced.
func TestReadinessDefaultOnCreate(t *testing.T) {
	f := newFixture(t)
	before := f.create(f.newFleet("before", v1alpha1.ProfilePersistentFleet, 2))
	f.startOperator()
	f.waitConverged(before.Name)
	beforeMembers := podUIDs(f.members(before))
	beforeSet := f.statefulSet(before.Name)

	installDeploy(t, "rbac/readiness_default.yaml")
	bindReadinessDefault(t, f)
	// The API server's policy informer takes a moment to see the binding: a dry-run create shows
	// when it is in force.
	if err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		out, err := f.fleets().Create(ctx, f.newFleet("probe", v1alpha1.ProfilePersistentFleet, 1), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && out.Spec.Readiness != nil, nil
	}); err != nil {
		t.Fatalf("the readiness default never applied to a dry-run create: %v", err)
	}

	plain := f.create(f.newFleet("plain", v1alpha1.ProfilePersistentFleet, 2))
	want := &v1alpha1.ReadinessSpec{PeriodSeconds: ptr[int32](2), FailureThreshold: ptr[int32](3), TimeoutSeconds: ptr[int32](1)}
	if !reflect.DeepEqual(plain.Spec.Readiness, want) {
		t.Errorf("fleet plain was stored with spec.readiness %+v, want %+v", plain.Spec.Readiness, want)
	}
	namedFleet := f.newFleet("named", v1alpha1.ProfilePersistentFleet, 2)
	namedFleet.Spec.Readiness = &v1alpha1.ReadinessSpec{PeriodSeconds: ptr[int32](5)}
	named := f.create(namedFleet)
	if !reflect.DeepEqual(named.Spec.Readiness, namedFleet.Spec.Readiness) {
		t.Errorf("fleet named was stored with spec.readiness %+v, want what it named, %+v", named.Spec.Readiness, namedFleet.Spec.Readiness)
	}
	for _, c := range []struct {
		fl                        *v1alpha1.CelldFleet
		period, failures, timeout int32
	}{{plain, 2, 3, 1}, {named, 5, 0, 0}} {
		f.waitConverged(c.fl.Name)
		p := f.statefulSet(c.fl.Name).Spec.Template.Spec.Containers[0].ReadinessProbe
		// An unnamed field stays unset in the template: the API server gives it Kubernetes' default.
		failures, timeout := c.failures, c.timeout
		if failures == 0 {
			failures, timeout = 3, 1
		}
		if p.PeriodSeconds != c.period || p.FailureThreshold != failures || p.TimeoutSeconds != timeout {
			t.Errorf("fleet %s: members probe every %ds, %d failures, %ds timeout; want %d, %d, %d", c.fl.Name,
				p.PeriodSeconds, p.FailureThreshold, p.TimeoutSeconds, c.period, failures, timeout)
		}
	}

	// An edit of the fleet that existed before: the policy does not apply to it.
	patch := []byte(`{"metadata":{"labels":{"edited":"yes"}},"spec":{"members":2}}`)
	edited, err := f.fleets().Patch(f.ctx, before.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if edited.Spec.Readiness != nil {
		t.Errorf("fleet before was given spec.readiness %+v by an edit: its members would restart", edited.Spec.Readiness)
	}
	f.waitConverged(before.Name)
	if got := f.statefulSet(before.Name); got.Generation != beforeSet.Generation ||
		!reflect.DeepEqual(got.Spec.Template.Spec.Containers[0].ReadinessProbe, beforeSet.Spec.Template.Spec.Containers[0].ReadinessProbe) {
		t.Errorf("fleet before: StatefulSet generation %d -> %d, probe %+v -> %+v", beforeSet.Generation, got.Generation,
			beforeSet.Spec.Template.Spec.Containers[0].ReadinessProbe, got.Spec.Template.Spec.Containers[0].ReadinessProbe)
	}
	if got := podUIDs(f.members(before)); !reflect.DeepEqual(got, beforeMembers) {
		t.Errorf("fleet before: members %v became %v", beforeMembers, got)
	}
}

// bindReadinessDefault binds the shipped policy as the shipped binding does, to the fixture's
// namespace only: the other tests' fleets run beside it.
func bindReadinessDefault(t *testing.T, f *fixture) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(suite.root, "deploy", "rbac", "readiness_default_binding.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict(data, b); err != nil {
		t.Fatalf("deploy/rbac/readiness_default_binding.yaml: %v", err)
	}
	b.Name += "-" + f.id
	b.Labels = map[string]string{testLabel: "true"}
	b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{corev1.LabelMetadataName: f.ns}}}
	client := suite.kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
	if _, err := client.Create(f.ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind the readiness default: %v", err)
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), b.Name, metav1.DeleteOptions{}) })
}

func podUIDs(pods []corev1.Pod) []types.UID {
	var out []types.UID
	for _, p := range pods {
		out = append(out, p.UID)
	}
	return out
}
