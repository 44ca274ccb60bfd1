package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// reinstallCRDs installs deploy/crds as TestMain does, once the deleted ones are gone.
func reinstallCRDs(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := kubectlCmd(ctx, "wait", "--for=delete", "--timeout=150s", "crd/celldfleets.celld.io", "crd/celldreservations.celld.io"); err != nil &&
		!strings.Contains(err.Error(), "not found") {
		t.Errorf("the deleted CRDs are not gone: %v", err)
	}
	if err := suite.cp.InstallCRDs(ctx); err != nil {
		t.Fatalf("reinstall: %v", err)
	}
}

// TestUninstallKeepsDisks: deleting the CRDs (kubectl delete -k deploy/, a GitOps prune) with a
// PersistentFleet running deletes the fleet, and the operator lets it go without deleting one of
// its claims, saying which it kept. It deletes every fleet of the cluster, so it runs on its own:
// not in parallel (Go runs the parallel tests after every sequential one), and it puts the CRDs
// back before it returns, for the tests after it.
func TestUninstallKeepsDisks(t *testing.T) {
	f := newFixture(t)
	f.startOperator()
	fl := f.newFleet("kept", v1alpha1.ProfilePersistentFleet, 3)
	fl, err := f.fleets().Create(f.ctx, fl, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fl = f.waitConverged(fl.Name)
	own := f.claimsOf(fl)
	if len(own) != 3 {
		t.Fatalf("claims of %s: %v; want 3", fl.Name, own)
	}
	claims := f.recordClaims()

	// Put back whatever happens, for the tests after this one.
	t.Cleanup(func() { reinstallCRDs(t) })
	if _, err := kubectlCmd(f.ctx, "delete", "--wait=false", "-f", filepath.Join(suite.root, "deploy", "crds")); err != nil {
		t.Fatalf("delete the CRDs: %v", err)
	}
	start := time.Now()
	if err := wait.PollUntilContextTimeout(f.ctx, poll, converge, true, func(ctx context.Context) (bool, error) {
		_, err := f.fleets().Get(ctx, fl.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("fleet %s not gone %s after its CRD was deleted", fl.Name, converge)
	}
	t.Logf("fleet %s went with its CRD %s after the delete", fl.Name, time.Since(start).Round(100*time.Millisecond))
	// Fleets of earlier tests still terminating, whose operators are gone, would hold the CRD's
	// deletion forever: they are released by hand, as their test's cleanup would.
	releaseOrphanFleets(t)

	// The claims are the operator's to delete only when a person deletes the fleet.
	f.holds(5*time.Second, "every claim kept", func() error {
		for uid, name := range own {
			c, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Get(f.ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if c.UID != uid || c.DeletionTimestamp != nil {
				return fmt.Errorf("claim %s replaced or being deleted", name)
			}
		}
		return nil
	})
	f.noDeletions(claims, "claims")
	// The operator says what it kept, on the fleet, for whoever looks after the uninstall.
	evs, err := suite.kube.CoreV1().Events(f.ns).List(f.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + fl.Name + ",reason=DisksKept"})
	if err != nil {
		t.Fatal(err)
	}
	said := ""
	for _, e := range evs.Items {
		if e.InvolvedObject.UID == fl.UID && e.Type == corev1.EventTypeWarning {
			said = e.Message
		}
	}
	for _, name := range own {
		if !strings.Contains(said, name) {
			t.Errorf("DisksKept event %q does not name claim %s", said, name)
		}
	}
	t.Logf("claims kept: %d; event: %s", len(own), said)
}

// releaseOrphanFleets releases the fleets left in any namespace once the operators that served
// them are gone (an earlier test's namespace still terminating): the CRD's deletion waits for
// every fleet, and no sequential test runs beside this one.
func releaseOrphanFleets(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	l, err := suite.celld.CelldV1alpha1().CelldFleets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return // the CRD is gone already: nothing is left
	}
	for _, fl := range l.Items {
		t.Logf("fleet %s/%s still there with its CRD deleted: released", fl.Namespace, fl.Name)
		_, _ = suite.celld.CelldV1alpha1().CelldFleets(fl.Namespace).Patch(ctx, fl.Name, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
}
