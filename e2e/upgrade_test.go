package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/contract"
)

// upgradeBase is the oldest commit the project supports upgrading from, and rolling back to: the
// last one whose members' Pods every later release renders the same (it added fsGroup to them,
// which rolled every fleet once). Its chart still shipped the CRDs in crds/.
const upgradeBase = "3190f34a0d03b0d071349139bb489f9e4b283a41"

// baseRelease extracts upgradeBase's tree (its deploy/ and chart) and builds its operator, both
// cached under .cache/upgrade/<commit>: it returns the tree and the binary.
func baseRelease(t *testing.T) (string, string) {
	t.Helper()
	dir := filepath.Join(suite.root, ".cache", "upgrade", upgradeBase)
	src, bin := filepath.Join(dir, "src"), filepath.Join(dir, "celld-operator")
	if _, err := os.Stat(bin); err == nil {
		return src, bin
	}
	start := time.Now()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	extract := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", suite.root, upgradeBase, src)
	if out, err := extract.CombinedOutput(); err != nil {
		t.Fatalf("extract the base commit %s (a clone with the project's history is needed): %v\n%s", upgradeBase, err, out)
	}
	build := exec.Command("go", "build", "-o", bin+".tmp", "./cmd/celld-operator")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the base operator: %v\n%s", err, out)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("base %s built in %s", upgradeBase[:7], time.Since(start).Round(time.Second))
	return src, bin
}

// fleetObjects is what an upgrade must leave alone: every member Pod (its UID and restarts),
// and the spec of every object the operator made for the fleets.
type fleetObjects map[string]string

func snapshotFleets(t *testing.T, f *fixture) fleetObjects {
	t.Helper()
	out := fleetObjects{}
	spec := func(kind, name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[kind+"/"+name] = string(b)
	}
	ctx, ns := f.ctx, f.ns
	pods, err := suite.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		restarts := int32(0)
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		spec("Pod", p.Name, map[string]any{"uid": p.UID, "restarts": restarts, "deleting": p.DeletionTimestamp != nil})
	}
	sets, err := suite.kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets.Items {
		spec("StatefulSet", s.Name, s.Spec)
	}
	deps, err := suite.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		spec("Deployment", d.Name, d.Spec)
	}
	svcs, err := suite.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		spec("Service", s.Name, s.Spec)
	}
	pdbs, err := suite.kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pdbs.Items {
		spec("PodDisruptionBudget", p.Name, p.Spec)
	}
	nps, err := suite.kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range nps.Items {
		spec("NetworkPolicy", p.Name, p.Spec)
	}
	claims, err := suite.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		spec("PersistentVolumeClaim", c.Name, map[string]any{"uid": c.UID, "spec": c.Spec})
	}
	return out
}

// diff names what differs between two snapshots.
func (before fleetObjects) diff(after fleetObjects) []string {
	var out []string
	for k, v := range before {
		switch w, ok := after[k]; {
		case !ok:
			out = append(out, k+" is gone")
		case w != v:
			// Where the two first differ, with some context: specs are long.
			i := 0
			for i < len(v) && i < len(w) && v[i] == w[i] {
				i++
			}
			from := max(0, i-120)
			out = append(out, fmt.Sprintf("%s changed at byte %d:\n  before ...%.300s\n  after  ...%.300s", k, i, v[from:], w[from:]))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			out = append(out, k+" is new")
		}
	}
	sort.Strings(out)
	return out
}

// holdStill: for d, every fleet stays converged and nothing of before changes; the first change
// fails the test, named.
func holdStill(t *testing.T, f *fixture, before fleetObjects, fleets []string, d time.Duration) {
	t.Helper()
	for _, name := range fleets {
		f.waitConverged(name)
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if changed := before.diff(snapshotFleets(t, f)); len(changed) > 0 {
			t.Fatalf("the fleets' objects changed:\n%s", strings.Join(changed, "\n"))
		}
		for _, name := range fleets {
			fl, err := f.fleets().Get(f.ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !converged(fl) {
				t.Fatalf("fleet %s left Steady: %s, %+v", name, fl.Status.State, fl.Status.Members)
			}
		}
		time.Sleep(time.Second)
	}
}

// upgradeSteps install the base release, upgrade it to this tree and roll it back, each the way
// docs/upgrade.md says for one way of installing.
type upgradeSteps struct {
	install, upgrade, rollback func(t *testing.T)
}

// runUpgrade runs fleets of both profiles through a change on the base operator, then upgrades
// and rolls back, each time judging from the API server that no member was restarted or
// replaced, no spec the operator writes changed, every fleet stayed Steady at its size, and the
// served CRD is this tree's after the upgrade and stays so after the rollback. The contract judge
// watches throughout.
func runUpgrade(t *testing.T, f *fixture, baseBinary string, steps upgradeSteps) {
	// The install may replace the CRDs, which ends every watch of fleets: the judge starts after.
	// The upgrade moves their storage version, which starts the API server's watch of fleets
	// anew: the judge lists again there (no operator runs then, so no write goes unseen).
	steps.install(t)
	judge := contract.WatchAcrossRestarts(f.ctx, t, suite.kube, suite.celld, f.ns, t.Logf)
	kubeconfig, _ := serviceAccountKubeconfig(t, f.ctx, operatorNamespace, "celld-operator")
	run := func(binary string) *operator {
		f.binary = binary
		return f.startOperator("--kubeconfig", kubeconfig, "--leader-elect", "--leader-election-namespace", operatorNamespace,
			"--leader-election-lease-duration=6s", "--leader-election-renew-deadline=4s", "--leader-election-retry-period=1s")
	}
	op := run(baseBinary)
	pf := f.newFleet("persistent", v1alpha1.ProfilePersistentFleet, 3)
	pf.Spec.Capacity.ScaleInStabilization = duration(0)
	pf = f.create(pf)
	bf := f.create(f.newFleet("bucket", v1alpha1.ProfileBucket, 2))
	f.waitConverged(pf.Name)
	f.waitConverged(bf.Name)
	f.update(pf.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 4 })
	f.update(bf.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 3 })
	fleets := []string{pf.Name, bf.Name}
	for _, name := range fleets {
		f.waitConverged(name)
	}
	before := snapshotFleets(t, f)
	t.Logf("base operator: %d objects of two fleets, grown to 4 and 3", len(before))

	op.stop(t)
	steps.upgrade(t)
	checkServedCRDs(t, filepath.Join(suite.root, "deploy", "crds"))
	op = run(suite.operator)
	// This tree's budget writes its unhealthyPodEvictionPolicy out (IfHealthyBudget, which the
	// base left unset): its operator rewrites every budget once, and nothing else.
	if err := wait.PollUntilContextTimeout(f.ctx, poll, converge, true, func(ctx context.Context) (bool, error) {
		for _, name := range fleets {
			b, err := suite.kube.PolicyV1().PodDisruptionBudgets(f.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || b.Spec.UnhealthyPodEvictionPolicy == nil || *b.Spec.UnhealthyPodEvictionPolicy != policyv1.IfHealthyBudget {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("the upgraded operator did not rewrite the fleets' budgets: %v", err)
	}
	before = snapshotFleets(t, f)
	holdStill(t, f, before, fleets, 20*time.Second)
	t.Logf("upgraded: every budget rewritten once, then nothing of the fleets changed")
	migrateStorage(t, f, before, fleets)

	op.stop(t)
	steps.rollback(t)
	checkServedCRDs(t, filepath.Join(suite.root, "deploy", "crds"))
	op = run(baseBinary)
	holdStill(t, f, before, fleets, 20*time.Second)
	t.Logf("rolled back on this tree's CRDs: nothing of the fleets changed")

	// The rolled-back operator still moves its fleets, on the reservations the newer one wrote.
	f.update(pf.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 3 })
	f.waitConverged(pf.Name)
	op.stop(t)
	op = run(suite.operator)
	for _, name := range fleets {
		f.deleteFleet(name, true)
	}
	op.stop(t)
	judge.Verify(t)
}

// migrateStorage runs kubectl celld migrate-storage, as docs/upgrade.md says after an
// upgrade: made under the base's CRDs, the fleets and reservations are stored as v1alpha1 until
// it rewrites them as v1beta1, changing nothing of them.
func migrateStorage(t *testing.T, f *fixture, before fleetObjects, fleets []string) {
	t.Helper()
	// Nothing has written the reservations since the upgrade: a converged fleet costs no write,
	// whichever release's operator runs it. (The budgets' rewrite wrote the fleets' status, under
	// the CRDs that store v1beta1.)
	stored := func(want string) {
		t.Helper()
		for _, name := range fleets {
			if got := storedAs(t, "celldfleets", f.ns, name); got != want {
				t.Errorf("fleet %s stored as %s, want %s", name, got, want)
			}
			fl, err := f.fleets().Get(f.ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			res := f.reservation(fl)
			if got := storedAs(t, "celldreservations", res.Namespace, res.Name); got != want {
				t.Errorf("reservation %s stored as %s, want %s", res.Name, got, want)
			}
		}
	}
	for _, name := range fleets {
		fl, err := f.fleets().Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res := f.reservation(fl)
		if got := storedAs(t, "celldreservations", res.Namespace, res.Name); got != "celld.io/v1alpha1" {
			t.Errorf("reservation %s stored as %s, want celld.io/v1alpha1", res.Name, got)
		}
	}
	out, stderr, err := f.kubectlCelld("migrate-storage")
	if err != nil {
		t.Fatalf("kubectl celld migrate-storage: %v\n%s%s", err, out, stderr)
	}
	t.Logf("kubectl celld migrate-storage:\n%s", out)
	checkStoredVersions(t, "v1beta1")
	stored("celld.io/v1beta1")
	holdStill(t, f, before, fleets, 10*time.Second)
	t.Logf("migrated: every object stored as v1beta1, nothing of the fleets changed")
}

// checkServedCRDs: the API server serves the CRDs of dir: each version's name, served, storage
// and schema, compared as JSON values.
func checkServedCRDs(t *testing.T, dir string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	crds := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("CRDs of %s: %v", dir, err)
	}
	versions := func(crd map[string]any) string {
		out := map[string]any{}
		list, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
		for _, v := range list {
			m := v.(map[string]any)
			out[fmt.Sprint(m["name"])] = map[string]any{"served": m["served"], "storage": m["storage"], "schema": m["schema"]}
		}
		b, _ := json.Marshal(out)
		return string(b)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := yaml.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		name, _, _ := unstructured.NestedString(want, "metadata", "name")
		var got string
		err = wait.PollUntilContextTimeout(context.Background(), poll, time.Minute, true, func(ctx context.Context) (bool, error) {
			served, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			got = versions(served.Object)
			return got == versions(want), nil
		})
		if err != nil {
			t.Fatalf("the API server does not serve the CRD %s of %s:\nserved %.500s\nwant   %.500s", name, file, got, versions(want))
		}
	}
}

// checkStoredVersions: each celld.io CRD says its objects are stored in version alone.
func checkStoredVersions(t *testing.T, version string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	crds := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, name := range []string{"celldfleets.celld.io", "celldreservations.celld.io", "celldbucketpolicies.celld.io"} {
		crd, err := crds.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions"); len(got) != 1 || got[0] != version {
			t.Errorf("CRD %s: stored versions %v, want [%s]", name, got, version)
		}
	}
}

// storedAs is the apiVersion an object is stored with in etcd, as the API server wrote it (JSON,
// for a custom resource), read through etcd's own gateway: what a client reads is converted to
// the version it asks for and cannot tell.
func storedAs(t *testing.T, resource, ns, name string) string {
	t.Helper()
	vars, err := suite.cp.Vars("ETCD_CLIENT_PORT")
	if err != nil || len(vars) != 1 {
		t.Fatalf("the etcd port: %v %v", vars, err)
	}
	key := fmt.Sprintf("/registry/celld.io/%s/%s/%s", resource, ns, name)
	body, _ := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	resp, err := http.Post("http://127.0.0.1:"+vars[0]+"/v3/kv/range", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("read %s from etcd: %v", key, err)
	}
	defer resp.Body.Close()
	var out struct {
		Kvs []struct {
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Kvs) != 1 {
		t.Fatalf("read %s from etcd: %v, %d values", key, err, len(out.Kvs))
	}
	var stored struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(out.Kvs[0].Value, &stored); err != nil {
		t.Fatalf("%s in etcd is not JSON: %v", key, err)
	}
	return stored.APIVersion
}

// TestUpgradeAndRollback: fleets made by the base release (upgradeBase) are taken over by this
// tree's operator and back, by Helm and by the plain manifests, each as docs/upgrade.md
// says, with nothing of the fleets changed (see runUpgrade).
//
// Not parallel: it installs the base release's CRDs, which other tests' fleets live in.
func TestUpgradeAndRollback(t *testing.T) {
	src, baseBinary := baseRelease(t)
	helm := filepath.Join(suite.cp.Bin, "helm")
	t.Cleanup(func() {
		// Whatever happened, the suite goes on with this tree's CRDs.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := kubectlCmd(ctx, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(suite.root, "deploy", "crds")); err != nil {
			t.Errorf("reinstall the CRDs: %v\n%s", err, out)
		}
		waitReservationPolicyGone(t)
	})
	kubectl := func(t *testing.T, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		if out, err := kubectlCmd(ctx, args...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// The CRDs as the base release had them: v1alpha1 alone, stored. The API server keeps every
	// version an object was ever stored in, so this tree's CRDs (v1beta1 stored) cannot be
	// replaced by them: they are deleted first, with whatever fleet an earlier test left, as
	// TestUninstallKeepsDisks does.
	baseCRDs := func(t *testing.T) {
		names := []string{"crd/celldfleets.celld.io", "crd/celldreservations.celld.io", "crd/celldbucketpolicies.celld.io"}
		kubectl(t, append([]string{"delete", "--ignore-not-found", "--wait=false"}, names...)...)
		releaseOrphanFleets(t)
		// A CRD deleted while the API server reinitializes its storage (this suite applied the
		// CRDs moments before) can stay Terminating for minutes: its cleanup fails with
		// InstanceDeletionFailed "storage is (re)initializing" and is retried with backoff. It
		// is gone within five minutes; waiting less failed a run on the oldest Kubernetes.
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		if out, err := kubectlCmd(ctx, append([]string{"wait", "--for=delete", "--timeout=300s"}, names...)...); err != nil &&
			!strings.Contains(err.Error()+out, "not found") {
			t.Fatalf("the CRDs are not gone: %v\n%s", err, out)
		}
		kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(src, "deploy", "crds"))
		checkServedCRDs(t, filepath.Join(src, "deploy", "crds"))
	}

	t.Run("helm", func(t *testing.T) {
		f := newFixture(t)
		h := func(t *testing.T, args ...string) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			c := exec.CommandContext(ctx, helm, append(args, "--namespace", operatorNamespace, "--kubeconfig", suite.kubeconfig)...)
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		values := []string{"--set", "namespaceMode=namespaced", "--set", "watchNamespace=" + f.ns}
		t.Cleanup(func() {
			c := exec.Command(helm, "uninstall", "celld-operator", "--namespace", operatorNamespace, "--wait", "--kubeconfig", suite.kubeconfig)
			if out, err := c.CombinedOutput(); err != nil {
				t.Errorf("helm uninstall: %v\n%s", err, out)
			}
		})
		runUpgrade(t, f, baseBinary, upgradeSteps{
			install: func(t *testing.T) {
				baseCRDs(t)
				h(t, append([]string{"install", "celld-operator", filepath.Join(src, "deploy", "helm", "celld-operator"), "--create-namespace"}, values...)...)
			},
			// docs/upgrade.md: from a chart that shipped its CRDs in crds/, --take-ownership once.
			upgrade: func(t *testing.T) {
				h(t, append([]string{"upgrade", "celld-operator", filepath.Join(suite.root, "deploy", "helm", "celld-operator"), "--take-ownership"}, values...)...)
			},
			// The base revision's templates have no CRDs; kept, they stay this tree's.
			rollback: func(t *testing.T) { h(t, "rollback", "celld-operator", "1", "--wait") },
		})
		// helm upgrade moves the CRDs: a chart whose CelldFleet CRD gained a field serves it
		// once upgraded, and the field is gone again with the next upgrade.
		h(t, append([]string{"upgrade", "celld-operator", filepath.Join(suite.root, "deploy", "helm", "celld-operator")}, values...)...)
		probe := chartWithField(t, "upgradeProbe")
		h(t, append([]string{"upgrade", "celld-operator", probe}, values...)...)
		checkServedCRDs(t, filepath.Join(probe, "files", "crds"))
		h(t, append([]string{"upgrade", "celld-operator", filepath.Join(suite.root, "deploy", "helm", "celld-operator")}, values...)...)
		checkServedCRDs(t, filepath.Join(suite.root, "deploy", "crds"))
	})

	t.Run("manifests", func(t *testing.T) {
		f := newFixture(t)
		dir := t.TempDir()
		render := func(t *testing.T, root, name string, withCRDs bool) string {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := kubectlCmd(ctx, "kustomize", filepath.Join(root, "deploy"))
			if err != nil {
				t.Fatalf("kubectl kustomize %s/deploy: %v\n%s", root, err, out)
			}
			var keep []string
			for _, doc := range strings.Split(out, "\n---\n") {
				if withCRDs || !strings.Contains(doc, "kind: CustomResourceDefinition\n") {
					keep = append(keep, doc)
				}
			}
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(strings.Join(keep, "\n---\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}
		base := render(t, src, "base.yaml", true)
		current := render(t, suite.root, "current.yaml", true)
		t.Cleanup(func() { uninstall(t, current) })
		runUpgrade(t, f, baseBinary, upgradeSteps{
			install: func(t *testing.T) {
				baseCRDs(t)
				kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", base)
			},
			// docs/upgrade.md: the CRDs first, then the operator.
			upgrade: func(t *testing.T) {
				kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(suite.root, "deploy", "crds"))
				kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", current)
			},
			// A rollback is the operator alone: the CRDs stay this tree's.
			rollback: func(t *testing.T) {
				kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", render(t, src, "base-operator.yaml", false))
			},
		})
	})
}

// chartWithField copies this tree's chart with a string field added to the CelldFleet CRD's spec
// in every version.
func chartWithField(t *testing.T, field string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "celld-operator")
	if out, err := exec.Command("cp", "-r", filepath.Join(suite.root, "deploy", "helm", "celld-operator"), dst).CombinedOutput(); err != nil {
		t.Fatalf("copy the chart: %v\n%s", err, out)
	}
	path := filepath.Join(dst, "files", "crds", "celld.io_celldfleets.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd["spec"].(map[string]any)["versions"].([]any) {
		props := v.(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
		props[field] = map[string]any{"type": "string", "description": "a field only this test's chart has"}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}
