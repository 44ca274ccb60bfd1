package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// operatorNamespace is the namespace deploy/ installs the operator in.
const operatorNamespace = "celld-system"

// deployFiles are the files of deploy/ that tests install for real, shared by every test of the
// run that needs them: each file is applied by the first test that asks for it and deleted when
// the last one is done, unless its object was there before and not the suite's (an installation
// of someone else's, kept as found). What the suite installs carries testLabel, so what an
// interrupted run left behind is recognized as the suite's, and its namespace swept.
var deployFiles struct {
	mu    sync.Mutex
	users map[string]int
	ours  map[string]bool
}

// installDeploy applies files of deploy/ (paths relative to it, namespace.yaml first) with a
// server-side apply, as `kubectl apply` would install them, and arranges for their removal in
// reverse order at the end of the test. Register it before the fixture, so that an operator
// running on these rights is stopped before they go.
func installDeploy(t *testing.T, files ...string) {
	t.Helper()
	deployFiles.mu.Lock()
	defer deployFiles.mu.Unlock()
	if deployFiles.users == nil {
		deployFiles.users, deployFiles.ours = map[string]int{}, map[string]bool{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, file := range files {
		path := filepath.Join(suite.root, "deploy", file)
		if deployFiles.users[file] == 0 {
			if file == "namespace.yaml" {
				awaitNamespaceUsable(t, ctx, operatorNamespace)
			}
			out, err := kubectlCmd(ctx, "get", "-f", path, "--ignore-not-found", "-o", "json")
			if err != nil {
				t.Fatalf("install deploy/%s: %v", file, err)
			}
			var found metav1.PartialObjectMetadata
			if strings.TrimSpace(out) != "" {
				if err := json.Unmarshal([]byte(out), &found); err != nil {
					t.Fatalf("install deploy/%s: %v", file, err)
				}
			}
			deployFiles.ours[file] = found.Name == "" || found.Labels[testLabel] == "true"
			if !deployFiles.ours[file] {
				t.Logf("deploy/%s: %s %s was already installed: applied over, kept at the end", file, found.Kind, found.Name)
			}
		}
		if _, err := kubectlCmd(ctx, "apply", "--server-side", "--force-conflicts", "--field-manager", "e2e", "-f", path); err != nil {
			t.Fatalf("install deploy/%s: %v", file, err)
		}
		if deployFiles.ours[file] {
			if _, err := kubectlCmd(ctx, "label", "--overwrite", "-f", path, testLabel+"=true"); err != nil {
				t.Fatalf("install deploy/%s: %v", file, err)
			}
		}
		deployFiles.users[file]++
	}
	t.Cleanup(func() {
		deployFiles.mu.Lock()
		defer deployFiles.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for i := len(files) - 1; i >= 0; i-- {
			file := files[i]
			if deployFiles.users[file]--; deployFiles.users[file] > 0 || !deployFiles.ours[file] {
				continue
			}
			path := filepath.Join(suite.root, "deploy", file)
			if _, err := kubectlCmd(ctx, "delete", "--ignore-not-found", "--wait=false", "-f", path); err != nil {
				t.Errorf("uninstall deploy/%s: %v", file, err)
			}
		}
	})
}

// awaitNamespaceUsable waits until a namespace is either gone or not being deleted: TestDeployManifests
// (or an earlier run) may have left it terminating, and nothing can be created in it then.
func awaitNamespaceUsable(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		ns, err := suite.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && ns.DeletionTimestamp == nil, nil
	})
	if err != nil {
		t.Fatalf("namespace %s still terminating after %s: %v", name, time.Since(start).Round(time.Second), err)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("namespace %s was terminating: waited %s", name, d.Round(100*time.Millisecond))
	}
}
