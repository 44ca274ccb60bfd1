package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDeployManifests: the kustomize base installs as a whole: the API server accepts every object
// of deploy/ (a server-side dry run, so the CRDs the other tests use are not touched).
func TestDeployManifests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A dry run cannot place objects in a namespace it only pretends to create.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "celld-system"}}
	if _, err := suite.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err == nil {
		t.Cleanup(func() {
			_ = suite.kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		})
	} else if !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	out, err := kubectlCmd(ctx, "apply", "-k", filepath.Join(suite.root, "deploy"), "--dry-run=server")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"serviceaccount/celld-operator", "clusterrole.rbac.authorization.k8s.io/celld-operator",
		"role.rbac.authorization.k8s.io/celld-operator-leader-election", "deployment.apps/celld-operator", "service/celld-operator-metrics",
		"validatingadmissionpolicy.admissionregistration.k8s.io/celld-reservations-operator-only",
		"validatingadmissionpolicybinding.admissionregistration.k8s.io/celld-reservations-operator-only",
		"customresourcedefinition.apiextensions.k8s.io/celldbucketpolicies.celld.io",
		"validatingadmissionpolicy.admissionregistration.k8s.io/celld-bucket-policy",
		"validatingadmissionpolicybinding.admissionregistration.k8s.io/celld-bucket-policy",
		"mutatingadmissionpolicy.admissionregistration.k8s.io/celld-readiness-default",
		"mutatingadmissionpolicybinding.admissionregistration.k8s.io/celld-readiness-default",
		"clusterrole.rbac.authorization.k8s.io/celld-aggregate-to-view", "clusterrole.rbac.authorization.k8s.io/celld-aggregate-to-edit",
		"clusterrole.rbac.authorization.k8s.io/celld-aggregate-to-admin"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply -k deploy/ --dry-run=server did not accept %s:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "clusterrole.rbac.authorization.k8s.io/celld-operator-metrics-reader") {
		t.Errorf("kubectl apply -k deploy/ does not install the metrics reader ClusterRole:\n%s", out)
	}
	// The namespaced overlay: its watched namespace must exist for a dry run of its Role.
	watched := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "celld-fleets"}}
	if _, err := suite.kube.CoreV1().Namespaces().Create(ctx, watched, metav1.CreateOptions{}); err == nil {
		t.Cleanup(func() {
			_ = suite.kube.CoreV1().Namespaces().Delete(context.Background(), watched.Name, metav1.DeleteOptions{})
		})
	} else if !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	out, err = kubectlCmd(ctx, "apply", "-k", filepath.Join(suite.root, "deploy", "namespaced"), "--dry-run=server")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"role.rbac.authorization.k8s.io/celld-operator", "rolebinding.rbac.authorization.k8s.io/celld-operator",
		"clusterrole.rbac.authorization.k8s.io/celld-operator-cluster-reads", "deployment.apps/celld-operator"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply -k deploy/namespaced/ --dry-run=server did not accept %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "clusterrole.rbac.authorization.k8s.io/celld-operator ") {
		t.Errorf("deploy/namespaced/ installs the cluster-wide ClusterRole celld-operator:\n%s", out)
	}
}
