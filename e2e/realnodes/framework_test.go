package realnodes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/contract"
	"github.com/celld/celld-operator/kinds"
)

const (
	poll = 500 * time.Millisecond
	// converge bounds a fleet's change on real nodes: containers start, probes answer, disks are
	// made by a helper Pod.
	converge = 4 * time.Minute
)

// kubectl runs the real cluster's kubectl.
func kubectl(ctx context.Context, args ...string) (string, error) {
	return suite.cp.Kubectl(ctx, args...)
}

func helm(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(suite.bin, "helm"), append(args, "--kubeconfig", suite.kubeconfig)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// restrictedNamespace creates a namespace where the restricted Pod Security Standard is enforced.
func restrictedNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
		"celld.io/realnodes-test":                    "true",
	}}}
	_, err := suite.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

type fixture struct {
	t   *testing.T
	ctx context.Context
	ns  string
	id  string
	// judge records the namespace from its creation, for the e2e contract's judge.
	judge *contract.Contract
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	id := rand.String(5)
	f := &fixture{t: t, ctx: ctx, id: id, ns: strings.ToLower(fmt.Sprintf("rn-%.20s-%s", t.Name(), id))}
	f.ns = strings.NewReplacer("/", "-", "_", "-").Replace(f.ns)
	if err := restrictedNamespace(ctx, f.ns); err != nil {
		t.Fatalf("namespace %s: %v", f.ns, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			f.dump()
		}
		_ = suite.kube.CoreV1().Namespaces().Delete(context.Background(), f.ns, metav1.DeleteOptions{})
	})
	f.judge = contract.Watch(ctx, t, suite.kube, suite.celld, f.ns)
	return f
}

func (f *fixture) dump() {
	for _, args := range [][]string{
		{"get", "celldfleets,pods,pvc,statefulsets,deployments", "-o", "wide", "-n", f.ns},
		{"get", "pv,nodes", "-o", "wide"},
		{"get", "events", "-n", f.ns, "--sort-by=.lastTimestamp"},
		{"logs", "-n", operatorNS, "-l", "app.kubernetes.io/name=celld-operator", "--tail=60", "--prefix"},
	} {
		out, err := kubectl(context.Background(), args...)
		f.t.Logf("kubectl %s:\n%s%v", strings.Join(args, " "), out, errOrEmpty(err))
	}
}

func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (f *fixture) newFleet(name string, profile v1alpha1.Profile, members int32) *v1alpha1.CelldFleet {
	fl := &v1alpha1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.CelldFleetSpec{
			Profile: profile,
			Members: members,
			Image:   celldImageV1,
			Resources: v1alpha1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi"),
			}},
			Bucket: v1alpha1.BucketSpec{Name: name + "-" + f.id, Region: "local"},
			// A scale-in asked for is carried out at once: the steps are what is judged here.
			Capacity: v1alpha1.CapacitySpec{ScaleInStabilization: &metav1.Duration{}},
		},
	}
	if profile == v1alpha1.ProfileBucket {
		fl.Spec.Bucket.Endpoint = suite.bucketEndpoint
	}
	if profile == v1alpha1.ProfilePersistentFleet {
		fl.Spec.Storage = &v1alpha1.StorageSpec{StorageClassName: "local-path", Size: resource.MustParse("64Mi")}
	}
	return fl
}

func (f *fixture) create(fl *v1alpha1.CelldFleet) *v1alpha1.CelldFleet {
	f.t.Helper()
	// For a few seconds after the CRDs are installed, the readiness default's admission policy
	// answers 503 ("Resource kind ... not found"): the API server's policy has not loaded the
	// CRD's schema yet (it refreshes every 5 to 10 s). A person retries; so does the test.
	var out *v1alpha1.CelldFleet
	var err error
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		out, err = suite.celld.CelldV1alpha1().CelldFleets(f.ns).Create(f.ctx, fl, metav1.CreateOptions{})
		if !apierrors.IsServiceUnavailable(err) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		f.t.Fatalf("create fleet %s: %v", fl.Name, err)
	}
	return out
}

func (f *fixture) update(name string, change func(*v1alpha1.CelldFleet)) {
	f.t.Helper()
	client := suite.celld.CelldV1alpha1().CelldFleets(f.ns)
	for {
		fl, err := client.Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			f.t.Fatalf("get fleet %s: %v", name, err)
		}
		change(fl)
		_, err = client.Update(f.ctx, fl, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			f.t.Fatalf("update fleet %s: %v", name, err)
		}
		return
	}
}

func (f *fixture) waitConverged(name string) *v1alpha1.CelldFleet {
	f.t.Helper()
	var last *v1alpha1.CelldFleet
	err := wait.PollUntilContextTimeout(f.ctx, poll, converge, true, func(ctx context.Context) (bool, error) {
		fl, err := suite.celld.CelldV1alpha1().CelldFleets(f.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = fl
		st := &fl.Status
		return st.ObservedGeneration == fl.Generation && st.State == v1alpha1.StateSteady &&
			meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady) &&
			st.Members.Current == fl.Spec.Members && st.Members.Ready == fl.Spec.Members, nil
	})
	if err != nil {
		f.t.Fatalf("fleet %s not converged within %s: %v\nlast status: %+v", name, converge, err, last)
	}
	return last
}

func (f *fixture) members(fl *v1alpha1.CelldFleet) []corev1.Pod {
	f.t.Helper()
	l, err := suite.kube.CoreV1().Pods(f.ns).List(f.ctx, metav1.ListOptions{LabelSelector: kinds.LabelFleetUID + "=" + string(fl.UID)})
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

// deleteFleet deletes a fleet and waits until it is gone.
func (f *fixture) deleteFleet(name string) {
	f.t.Helper()
	client := suite.celld.CelldV1alpha1().CelldFleets(f.ns)
	if err := client.Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatalf("delete fleet %s: %v", name, err)
	}
	err := wait.PollUntilContextTimeout(f.ctx, poll, converge, true, func(ctx context.Context) (bool, error) {
		_, err := client.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		f.t.Fatalf("fleet %s not gone within %s: %v", name, converge, err)
	}
}

// --- what the API server recorded ---------------------------------------------------------------

type seen = contract.Seen

// verify judges everything the API server recorded in the fixture's namespace since it was made
// against the safety contract, as the e2e suite on kwok nodes does.
func (f *fixture) verify() {
	f.t.Helper()
	f.judge.Verify(f.t)
}

func (f *fixture) recordPods() *contract.Recorder {
	c := suite.kube.CoreV1().Pods(f.ns)
	return contract.Record(f.ctx, f.t, contract.ListWatch("pods", c.List, c.Watch))
}

func (f *fixture) recordClaims() *contract.Recorder {
	c := suite.kube.CoreV1().PersistentVolumeClaims(f.ns)
	return contract.Record(f.ctx, f.t, contract.ListWatch("persistentvolumeclaims", c.List, c.Watch))
}

func (f *fixture) recordStatefulSets() *contract.Recorder {
	c := suite.kube.AppsV1().StatefulSets(f.ns)
	return contract.Record(f.ctx, f.t, contract.ListWatch("statefulsets", c.List, c.Watch))
}

func (f *fixture) recordDeployments() *contract.Recorder {
	c := suite.kube.AppsV1().Deployments(f.ns)
	return contract.Record(f.ctx, f.t, contract.ListWatch("deployments", c.List, c.Watch))
}

// --- what the machine runs ----------------------------------------------------------------------

// member is one celld process found on this machine: every node's containers run here, so their
// processes are this machine's, with the environment the kubelet gave them.
type member struct {
	pid        int
	name, uid  string // CELLD_MEMBER_NAME, CELLD_FLEET_UID
	build      string // CELLD_BUILD: which of the suite's images
	procUID    int
	procGroups []int
}

// processes lists the celld processes running now, by member name, for the fleet of UID uid.
func processes(uid types.UID) map[string][]member {
	out := map[string][]member{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env := environ(pid)
		if env["CELLD_FLEET_UID"] != string(uid) {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if strings.TrimSpace(string(comm)) != "celld" {
			continue
		}
		m := member{pid: pid, uid: string(uid), name: env["CELLD_MEMBER_NAME"], build: env["CELLD_BUILD"], procUID: -1}
		status, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		for _, line := range strings.Split(string(status), "\n") {
			fields := strings.Fields(line)
			switch {
			case len(fields) >= 2 && fields[0] == "Uid:":
				m.procUID, _ = strconv.Atoi(fields[1])
			case len(fields) >= 1 && fields[0] == "Groups:":
				for _, g := range fields[1:] {
					n, _ := strconv.Atoi(g)
					m.procGroups = append(m.procGroups, n)
				}
			}
		}
		out[m.name] = append(out[m.name], m)
	}
	return out
}

// copies samples the celld processes of a fleet every interval until stopped, and remembers the
// most copies of any one member that ever ran at once.
type copies struct {
	mu   sync.Mutex
	most map[string]int
	stop chan struct{}
	done chan struct{}
}

func watchCopies(uid types.UID, every time.Duration) *copies {
	c := &copies{most: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			for name, ps := range processes(uid) {
				c.mu.Lock()
				if len(ps) > c.most[name] {
					c.most[name] = len(ps)
				}
				c.mu.Unlock()
			}
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
		}
	}()
	return c
}

func (c *copies) end() map[string]int {
	close(c.stop)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.most
}
