package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	celldv1alpha1 "github.com/celld/celld-operator/api/generated/clientset/versioned/typed/celld/v1alpha1"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/contract"
	"github.com/celld/celld-operator/e2e/testenv"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

const (
	// testLabel marks the suite's namespaces.
	testLabel = "e2e.celld.io/test"
	// image is never pulled: kwok fakes the Pods' status.
	image = "ghcr.io/celld/celld:e2e"
	poll  = 250 * time.Millisecond
	// converge bounds how long a fleet of a few members takes to be created, grown or shrunk.
	converge = 3 * time.Minute
)

// fixture is one test's namespace, operators and observers.
type fixture struct {
	t   *testing.T
	ctx context.Context
	ns  string
	id  string // random, in the namespace's and the buckets' names

	ops    []*operator
	dumped sync.Once
	// binary, when set, is the operator startOperator runs instead of the suite's test build.
	binary string
}

// newFixture creates the test's namespace under the restricted Pod Security Standard, and arranges
// for everything to be torn down in order: fleets (registered later, so removed first, while an
// operator still runs to release their finalizers), then operators, then the namespace.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	id := fmt.Sprintf("%06x", rand.IntN(1<<24))
	f := &fixture{t: t, ctx: ctx, ns: namespaceName(t.Name(), id), id: id}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		testLabel:                            "true",
	}}}
	if _, err := suite.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", f.ns, err)
	}
	t.Cleanup(func() {
		defer cancel()
		err := suite.kube.CoreV1().Namespaces().Delete(context.Background(), f.ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", f.ns, err)
		}
	})
	t.Cleanup(f.stopOperators)
	t.Cleanup(f.dumpIfFailed)
	t.Logf("namespace %s", f.ns)
	return f
}

func namespaceName(test, id string) string {
	s := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(test, "-"))
	s = strings.Trim(strings.TrimPrefix(s, "test"), "-")
	if len(s) > 40 {
		s = s[:40]
	}
	return "e2e-" + strings.Trim(s, "-") + "-" + id
}

// --- the operator process ----------------------------------------------------------------------

// operator is one celld-operator process of a test.
type operator struct{ *testenv.Operator }

// startOperator starts celld-operator for the fixture's namespace and waits until it is ready.
// Later flags override the defaults.
func (f *fixture) startOperator(flags ...string) *operator {
	f.t.Helper()
	logPath := filepath.Join(suite.logDir, fmt.Sprintf("%s-%d.log", strings.ReplaceAll(f.t.Name(), "/", "_"), len(f.ops)))
	bin := suite.operator
	if f.binary != "" {
		bin = f.binary
	}
	op, err := testenv.Start(f.ctx, testenv.Options{
		Binary: bin, LogPath: logPath, DieWithParent: true, Ready: time.Minute, Poll: poll,
		Args: append([]string{"--kubeconfig", suite.kubeconfig, "--namespace", f.ns, "--workers", "4"}, flags...),
	}, func(op *testenv.Operator) {
		f.ops = append(f.ops, &operator{op})
		f.t.Logf("operator pid %d (metrics %s, log %s)", op.Cmd.Process.Pid, op.Metrics, op.LogPath)
	})
	if err != nil {
		f.t.Fatalf("%v\n%s", err, tail(logPath, 30))
	}
	return &operator{op}
}

// stop sends SIGTERM and waits for a clean exit, killing the process if it does not come.
func (op *operator) stop(t *testing.T) {
	if err := op.Stop(); err != nil {
		t.Error(err)
	}
}

// loggedSince is what the operator logged after mark (a LogOffset), its last n lines: a check that finds a
// write it did not expect says which decision made it.
func (op *operator) loggedSince(mark int64, n int) string {
	b, err := os.ReadFile(op.LogPath)
	if err != nil {
		return err.Error()
	}
	if mark > int64(len(b)) {
		mark = 0
	}
	lines := strings.Split(strings.TrimRight(string(b[mark:]), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "\n\toperator log:\n\t" + strings.Join(lines, "\n\t")
}

// kill is a crash: SIGKILL, no chance to release anything.
func (op *operator) kill() { op.Kill() }

func (f *fixture) stopOperators() {
	for _, op := range f.ops {
		op.stop(f.t)
	}
}

// writes reads the operator's api_writes_total counter: the total and each verb/resource series.
func (op *operator) writes(t *testing.T) (float64, map[string]float64) {
	t.Helper()
	return op.counter(t, "celld_operator_api_writes_total")
}

// heals reads the operator's heals_total counter by reason.
func (op *operator) heals(t *testing.T) (float64, map[string]float64) {
	t.Helper()
	return op.counter(t, "celld_operator_heals_total")
}

// counter sums a counter's series; series are keyed by their labels.
func (op *operator) counter(t *testing.T, name string) (float64, map[string]float64) {
	t.Helper()
	ms, err := op.Scrape()
	if err != nil {
		t.Fatalf("read metrics: %v", err)
	}
	total, series := ms.Series(name)
	return total, series
}

func formatSeries(s map[string]float64) string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n\t%s %g", k, s[k])
	}
	return b.String()
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// --- fleets ------------------------------------------------------------------------------------

// newFleet is a small valid fleet; Bucket fleets run as a Deployment unless the test says otherwise.
// Its bucket carries the fixture's id: a bucket is reserved cluster-wide, and outlives its fleet.
func (f *fixture) newFleet(name string, profile v1alpha1.Profile, members int32) *v1alpha1.CelldFleet {
	fl := &v1alpha1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.CelldFleetSpec{
			Profile: profile,
			Members: members,
			Image:   image,
			Resources: v1alpha1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
			}},
			Bucket: v1alpha1.BucketSpec{Name: f.bucket(name), Region: "us-east-1"},
		},
	}
	if profile == v1alpha1.ProfilePersistentFleet {
		fl.Spec.Storage = &v1alpha1.StorageSpec{StorageClassName: "kwok-volume", Size: resource.MustParse("1Gi")}
	}
	return fl
}

// bucket names a bucket no other test, run or demo uses.
func (f *fixture) bucket(name string) string { return name + "-" + f.id }

func duration(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func (f *fixture) fleets() celldv1alpha1.CelldFleetInterface {
	return suite.celld.CelldV1alpha1().CelldFleets(f.ns)
}

// create creates a fleet and arranges for it to be deleted, and waited for, at the end.
func (f *fixture) create(fl *v1alpha1.CelldFleet) *v1alpha1.CelldFleet {
	f.t.Helper()
	// For a few seconds after the CRDs are installed, the readiness default's admission policy
	// answers 503 ("Resource kind ... not found"): the API server's policy has not loaded the
	// CRD's schema yet (it refreshes every 5 to 10 s). A person retries; so does the test.
	var out *v1alpha1.CelldFleet
	var err error
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		out, err = f.fleets().Create(f.ctx, fl, metav1.CreateOptions{})
		if !apierrors.IsServiceUnavailable(err) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		f.t.Fatalf("create fleet %s: %v", fl.Name, err)
	}
	f.t.Cleanup(func() {
		f.dumpIfFailed()
		f.deleteFleet(out.Name, false)
	})
	return out
}

// deleteFleet deletes a fleet and waits until it is gone. At cleanup (fatal false) a fleet stuck
// on its finalizer is reported, then released by hand so the namespace can go.
func (f *fixture) deleteFleet(name string, fatal bool) {
	f.t.Helper()
	client, ctx := f.fleets(), context.Background()
	if err := client.Delete(ctx, name, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		f.t.Errorf("delete fleet %s: %v", name, err)
		return
	}
	var last *v1alpha1.CelldFleet
	err := wait.PollUntilContextTimeout(ctx, poll, converge, true, func(ctx context.Context) (bool, error) {
		fl, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		last = fl
		return false, err
	})
	if err == nil {
		return
	}
	msg := fmt.Sprintf("fleet %s not gone %s after delete: %v\n%s", name, converge, err, toYAML(last))
	if fatal {
		f.t.Fatal(msg)
	}
	f.t.Error(msg)
	_, _ = client.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
}

// update reads, changes and writes a fleet's spec, retrying on conflicts.
func (f *fixture) update(name string, change func(*v1alpha1.CelldFleet)) *v1alpha1.CelldFleet {
	f.t.Helper()
	client := f.fleets()
	for {
		fl, err := client.Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			f.t.Fatalf("get fleet %s: %v", name, err)
		}
		change(fl)
		out, err := client.Update(f.ctx, fl, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			f.t.Fatalf("update fleet %s: %v", name, err)
		}
		return out
	}
}

// waitFleet polls a fleet until ok holds, failing the test after timeout with the last status.
func (f *fixture) waitFleet(name string, timeout time.Duration, what string, ok func(*v1alpha1.CelldFleet) bool) *v1alpha1.CelldFleet {
	f.t.Helper()
	var last *v1alpha1.CelldFleet
	err := wait.PollUntilContextTimeout(f.ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		fl, err := f.fleets().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = fl
		return ok(fl), nil
	})
	if err != nil {
		f.t.Fatalf("fleet %s: %s: not within %s\nlast seen:\n%s", name, what, timeout, toYAML(last))
	}
	return last
}

// waitConverged waits until the fleet is Steady and Ready at its requested size.
func (f *fixture) waitConverged(name string) *v1alpha1.CelldFleet {
	f.t.Helper()
	return f.waitFleet(name, converge, "converged", converged)
}

// converged: Steady, Ready, every requested member ready, computed from the current spec.
func converged(fl *v1alpha1.CelldFleet) bool {
	st := &fl.Status
	return st.ObservedGeneration == fl.Generation && st.State == v1alpha1.StateSteady &&
		meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady) &&
		st.Members.Current == fl.Spec.Members && st.Members.Ready == fl.Spec.Members
}

func condition(fl *v1alpha1.CelldFleet, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(fl.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{Type: typ, Status: "absent"}
}

func (f *fixture) reservation(fl *v1alpha1.CelldFleet) *v1alpha1.CelldReservation {
	f.t.Helper()
	r, err := suite.celld.CelldV1alpha1().CelldReservations(f.ns).Get(f.ctx, reservationName(fl.Spec.Bucket), metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("get reservation of fleet %s: %v", fl.Name, err)
	}
	return r
}

// reservationName is the name the operator derives from the bucket's canonical identity.
func reservationName(b v1alpha1.BucketSpec) string { return render.ReservationName(b) }

// --- members -----------------------------------------------------------------------------------

func memberSelector(fl *v1alpha1.CelldFleet) string {
	return kinds.LabelFleetUID + "=" + string(fl.UID)
}

func (f *fixture) members(fl *v1alpha1.CelldFleet) []corev1.Pod {
	f.t.Helper()
	l, err := suite.kube.CoreV1().Pods(f.ns).List(f.ctx, metav1.ListOptions{LabelSelector: memberSelector(fl)})
	if err != nil {
		f.t.Fatalf("list members of %s: %v", fl.Name, err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (f *fixture) statefulSet(name string) *appsv1.StatefulSet {
	f.t.Helper()
	s, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("get statefulset %s: %v", name, err)
	}
	return s
}

// --- kubectl and scripts -----------------------------------------------------------------------

func (f *fixture) kubectl(args ...string) string {
	f.t.Helper()
	out, err := kubectlCmd(f.ctx, append([]string{"--namespace", f.ns}, args...)...)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// nodeScript runs cluster/node.sh (node loss and return).
func nodeScript(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(suite.root, "cluster", "node.sh"), args...)
	cmd.Dir = suite.root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cluster/node.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// --- watches -----------------------------------------------------------------------------------

type (
	seen     = contract.Seen
	recorder = contract.Recorder
)

// record starts recording one kind in the fixture's lifetime.
func (f *fixture) record(what string, list func(context.Context) (runtime.Object, error), watchFn cache.WatchFuncWithContext) *recorder {
	f.t.Helper()
	return contract.Record(f.ctx, f.t, contract.Source{What: what, List: list, Watch: watchFn})
}

// gone: the recorder saw every one of these objects deleted.
func gone(uids ...types.UID) func([]seen) bool {
	return func(evs []seen) bool {
		d := deletions(evs)
		for _, uid := range uids {
			if d[uid].gone.IsZero() {
				return false
			}
		}
		return true
	}
}

// rolledOutAt: the recorder saw the StatefulSet rolled out at replicas.
func rolledOutAt(name string, replicas int32) func([]seen) bool {
	return func(evs []seen) bool {
		for i := len(evs) - 1; i >= 0; i-- {
			if s, ok := evs[i].Obj.(*appsv1.StatefulSet); ok && s.Name == name {
				return evs[i].Type != watch.Deleted && *s.Spec.Replicas == replicas && contract.RolledOut(s)
			}
		}
		return false
	}
}

func (f *fixture) recordPods() *recorder {
	c := suite.kube.CoreV1().Pods(f.ns)
	return f.record("pods", func(ctx context.Context) (runtime.Object, error) { return c.List(ctx, metav1.ListOptions{}) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return c.Watch(ctx, o) })
}

func (f *fixture) recordClaims() *recorder {
	c := suite.kube.CoreV1().PersistentVolumeClaims(f.ns)
	return f.record("persistentvolumeclaims", func(ctx context.Context) (runtime.Object, error) { return c.List(ctx, metav1.ListOptions{}) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return c.Watch(ctx, o) })
}

func (f *fixture) recordStatefulSets() *recorder {
	c := suite.kube.AppsV1().StatefulSets(f.ns)
	return f.record("statefulsets", func(ctx context.Context) (runtime.Object, error) { return c.List(ctx, metav1.ListOptions{}) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return c.Watch(ctx, o) })
}

func (f *fixture) recordFleets() *recorder {
	c := suite.celld.CelldV1alpha1().CelldFleets(f.ns)
	return f.record("celldfleets", func(ctx context.Context) (runtime.Object, error) { return c.List(ctx, metav1.ListOptions{}) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return c.Watch(ctx, o) })
}

// deletion is when an object's deletion was first seen (deletionTimestamp set, or gone at once
// as a forced deletion is) and when it was gone: as the watch delivered it, and as the resource
// version of the write. The local control plane has one etcd, whose revision every resource
// version is, so resource versions order writes across kinds where receive times might not.
type deletion struct {
	name                string
	requested, gone     time.Time
	requestedRV, goneRV uint64
}

// deletions lists, by UID, every object whose deletion the recorder saw.
func deletions(evs []seen) map[types.UID]deletion {
	out := map[types.UID]deletion{}
	for _, e := range evs {
		m := e.Meta()
		d, known := out[m.GetUID()]
		d.name = m.GetName()
		rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
		if (m.GetDeletionTimestamp() != nil || e.Type == watch.Deleted) && d.requested.IsZero() {
			d.requested, d.requestedRV = e.At, rv
			known = true
		}
		if e.Type == watch.Deleted {
			d.gone, d.goneRV = e.At, rv
		}
		if known {
			out[m.GetUID()] = d
		}
	}
	return out
}

func names(d map[types.UID]deletion) []string {
	var out []string
	for uid, x := range d {
		out = append(out, x.name+" ("+string(uid)+")")
	}
	sort.Strings(out)
	return out
}

// replicaChange is one change of a workload's spec.replicas, with the version of the workload
// observed just before it.
type replicaChange struct {
	from, to int32
	at       time.Time
	before   *appsv1.StatefulSet
}

// statefulSetChanges lists the changes of one StatefulSet's spec.replicas, in order.
func statefulSetChanges(evs []seen, name string) []replicaChange {
	var out []replicaChange
	var prev *appsv1.StatefulSet
	for _, e := range evs {
		s, ok := e.Obj.(*appsv1.StatefulSet)
		if !ok || s.Name != name || e.Type == watch.Deleted {
			continue
		}
		if prev != nil && *s.Spec.Replicas != *prev.Spec.Replicas {
			out = append(out, replicaChange{from: *prev.Spec.Replicas, to: *s.Spec.Replicas, at: e.At, before: prev})
		}
		prev = s
	}
	return out
}

// checkOneStepShrink asserts that a StatefulSet went from..to one member per step, each step only
// once the previous one had rolled out.
func checkOneStepShrink(t *testing.T, changes []replicaChange, from, to int32) {
	t.Helper()
	steps := make([]shrinkStep, len(changes))
	for i, c := range changes {
		steps[i] = shrinkStep{from: c.from, to: c.to, rolledOut: contract.RolledOut(c.before), before: contract.DescribeStatefulSet(c.before)}
	}
	checkShrinkSteps(t, "spec.replicas", steps, from, to)
}

// shrinkStep is one change of a workload's spec.replicas, with the workload as it stood before it.
type shrinkStep struct {
	from, to  int32
	rolledOut bool
	before    string
}

// checkShrinkSteps asserts that a workload went from..to one member per step, each step only once
// the previous one had rolled out.
func checkShrinkSteps(t *testing.T, what string, changes []shrinkStep, from, to int32) {
	t.Helper()
	var steps []string
	for _, c := range changes {
		steps = append(steps, fmt.Sprintf("%d->%d", c.from, c.to))
	}
	t.Logf("%s changes: %s", what, strings.Join(steps, ", "))
	if int32(len(changes)) != from-to {
		t.Errorf("want %d steps of one member from %d to %d, got %d: %s", from-to, from, to, len(changes), strings.Join(steps, ", "))
	}
	want := from
	for _, c := range changes {
		if c.from != want || c.to != want-1 {
			t.Errorf("step %d->%d: want %d->%d (one member per step)", c.from, c.to, want, want-1)
		}
		if !c.rolledOut {
			t.Errorf("step %d->%d taken before the previous change rolled out: %s", c.from, c.to, c.before)
		}
		want = c.to
	}
}

// --- failure reports ---------------------------------------------------------------------------

func toYAML(o any) string {
	if o == nil {
		return "<nil>"
	}
	if obj, ok := o.(metav1.Object); ok {
		obj.SetManagedFields(nil)
	}
	b, err := yaml.Marshal(o)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// dumpIfFailed logs, once, what a person debugging a failed test looks at first. Fleet cleanups
// call it before they delete anything.
func (f *fixture) dumpIfFailed() {
	if f.t.Failed() {
		f.dumped.Do(f.dump)
	}
}

func (f *fixture) dump() {
	ctx := context.Background()
	if l, err := suite.celld.CelldV1alpha1().CelldFleets(f.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			fl := &l.Items[i]
			f.t.Logf("fleet %s: generation %d, finalizers %v, status:\n%s", fl.Name, fl.Generation, fl.Finalizers, toYAML(fl.Status))
		}
	}
	if out, err := kubectlCmd(ctx, "--namespace", f.ns, "get", "pods,pvc,statefulsets,deployments,celldreservations", "-o", "wide"); err == nil {
		f.t.Logf("objects:\n%s", out)
	}
	for _, op := range f.ops {
		f.t.Logf("operator log %s (last lines):\n%s", op.LogPath, tail(op.LogPath, 40))
	}
}

func ptr[T any](v T) *T { return &v }
