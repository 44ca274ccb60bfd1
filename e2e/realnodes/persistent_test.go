package realnodes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/render"
)

// disk is a member's claim as it is on this machine: the folder the provisioner made for it.
type disk struct {
	claim, claimUID, dir string
}

// disks maps each member's data claim to its folder, through the PersistentVolume bound to it.
func (f *fixture) disks(fl *v1alpha1.CelldFleet) map[string]disk {
	f.t.Helper()
	out := map[string]disk{}
	claims, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatalf("list claims: %v", err)
	}
	for _, c := range claims.Items {
		if c.Spec.VolumeName == "" {
			continue
		}
		pv, err := suite.kube.CoreV1().PersistentVolumes().Get(f.ctx, c.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			f.t.Fatalf("PersistentVolume %s of claim %s: %v", c.Spec.VolumeName, c.Name, err)
		}
		var dir string
		switch {
		case pv.Spec.Local != nil:
			dir = pv.Spec.Local.Path
		case pv.Spec.HostPath != nil:
			dir = pv.Spec.HostPath.Path
		}
		if !strings.HasPrefix(dir, suite.run+"/nodes/") {
			f.t.Fatalf("claim %s's volume %s is at %q, not on a real node's disk folder", c.Name, pv.Name, dir)
		}
		out[c.Name] = disk{claim: c.Name, claimUID: string(c.UID), dir: dir}
	}
	return out
}

// readySettle bounds how long a converged fleet's members may take to be Ready together. The
// fleet's status can say every member is Ready while one is briefly not: celld answers not ready
// on a member holding the only live copy of a peer's keys while that peer recovers, a few seconds
// after the peer's restart, which a probe every 2 s shows.
const readySettle = 30 * time.Second

// membersReady waits until every member Pod of fl is Ready, and fails naming those that stay
// not Ready past readySettle.
func (f *fixture) membersReady(fl *v1alpha1.CelldFleet) []corev1.Pod {
	f.t.Helper()
	var pods []corev1.Pod
	var notReady []string
	deadline := time.Now().Add(readySettle)
	for {
		pods, notReady = f.members(fl), nil
		for _, p := range pods {
			if !podReady(&p) {
				notReady = append(notReady, p.Name)
			}
		}
		if len(notReady) == 0 || time.Now().After(deadline) || f.ctx.Err() != nil {
			break
		}
		time.Sleep(poll)
	}
	for _, n := range notReady {
		f.t.Errorf("member %s is not Ready %s after its fleet converged", n, readySettle)
	}
	return pods
}

// checkMembersRun judges every member from the API server (Ready, one per node while the fleet
// fits) and from the machine (one celld process per member, not root, in the volumes' group,
// having written its data folder, running the image the fleet asks for).
func (f *fixture) checkMembersRun(fl *v1alpha1.CelldFleet, build string) {
	f.t.Helper()
	pods := f.membersReady(fl)
	if len(pods) != int(fl.Spec.Members) {
		f.t.Fatalf("%d member Pods, want %d", len(pods), fl.Spec.Members)
	}
	perNode := map[string]int{}
	for _, p := range pods {
		perNode[p.Spec.NodeName]++
	}
	if up := f.nodesUp(); len(pods) <= up && len(perNode) != len(pods) {
		f.t.Errorf("members by node %v: %d members must spread over %d nodes (%d are up)", perNode, len(pods), len(pods), up)
	}
	procs := processes(fl.UID)
	for _, p := range pods {
		ps := procs[p.Name]
		if len(ps) != 1 {
			f.t.Errorf("member %s: %d celld processes on the machine, want 1", p.Name, len(ps))
			continue
		}
		m := ps[0]
		if m.procUID <= 0 {
			f.t.Errorf("member %s runs as uid %d, want a non-root user", p.Name, m.procUID)
		}
		if !contains(m.procGroups, int(render.DataGroup)) {
			f.t.Errorf("member %s's process has groups %v, not the volumes' group %d", p.Name, m.procGroups, render.DataGroup)
		}
		if m.build != build {
			f.t.Errorf("member %s runs build %q, want %q", p.Name, m.build, build)
		}
	}
	if fl.Spec.Profile != v1alpha1.ProfilePersistentFleet {
		return
	}
	disks := f.disks(fl)
	for _, p := range pods {
		d, ok := disks["data-"+p.Name]
		if !ok {
			f.t.Errorf("member %s has no disk bound (claims %v)", p.Name, keys(disks))
			continue
		}
		written := ownedFiles(d.dir, procs[p.Name])
		if written == 0 {
			f.t.Errorf("member %s wrote nothing of its own to its disk %s", p.Name, d.dir)
		}
	}
}

// ownedFiles counts the files under dir that the member's process owns: what it wrote itself.
func ownedFiles(dir string, ps []member) int {
	if len(ps) == 0 {
		return 0
	}
	n := 0
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) == ps[0].procUID {
			n++
		}
		return nil
	})
	return n
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// replicaSteps are a workload's replica counts (StatefulSet or Deployment) in the order the API
// server recorded them.
func replicaSteps(evs []seen) []int32 {
	var out []int32
	for _, e := range evs {
		var r *int32
		switch w := e.Obj.(type) {
		case *appsv1.StatefulSet:
			r = w.Spec.Replicas
		case *appsv1.Deployment:
			r = w.Spec.Replicas
		}
		if r != nil && (len(out) == 0 || out[len(out)-1] != *r) {
			out = append(out, *r)
		}
	}
	return out
}

// checkShrink judges that the recorded workload went from its last time at from down to to one
// member per write.
func checkShrink(t *testing.T, kind string, evs []seen, from, to int32) {
	t.Helper()
	got := replicaSteps(evs)
	shrink := got
	for i, n := range got {
		if n == from {
			shrink = got[i:]
		}
	}
	ok := len(shrink) == int(from-to)+1
	for i := 0; ok && i < len(shrink); i++ {
		ok = shrink[i] == from-int32(i)
	}
	if !ok {
		t.Errorf("the %s's replicas went %v; the shrink must go from %d to %d one member per step", kind, got, from, to)
	}
}

// TestPersistentFleetOnRealNodes runs a PersistentFleet's whole life on real nodes: created,
// grown, shrunk one member per step, upgraded by a rolling update, a member's container killed,
// and deleted; each step judged from the API server and from the member processes and their
// folders on this machine.
func TestPersistentFleetOnRealNodes(t *testing.T) {
	f := newFixture(t)
	// A fleet of another namespace whose disk must outlive this one's deletion.
	other := newFixture(t)
	bystander := other.create(other.newFleet("bystander", v1alpha1.ProfilePersistentFleet, 1))

	fl := f.create(f.newFleet("pf", v1alpha1.ProfilePersistentFleet, 3))
	fl = f.waitConverged(fl.Name)
	f.checkMembersRun(fl, "v1")
	bystander = other.waitConverged(bystander.Name)
	bystanderDisks := other.disks(bystander)

	steps := f.recordStatefulSets()

	t.Log("grow 3 -> 5")
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Members = 5 })
	fl = f.waitConverged(fl.Name)
	f.checkMembersRun(fl, "v1")

	t.Log("shrink 5 -> 3")
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Members = 3 })
	fl = f.waitConverged(fl.Name)
	f.checkMembersRun(fl, "v1")
	checkShrink(t, "StatefulSet", steps.Events(t), 5, 3)
	if procs := processes(fl.UID); len(procs) != 3 {
		t.Errorf("celld processes of members %v after the shrink, want pf-0..2 only", keys(procs))
	}

	t.Log("rolling upgrade to v2")
	fl = f.upgrade(fl)

	t.Log("kill a member's container")
	before := f.members(fl)
	victim := before[1]
	disksBefore := f.disks(fl)
	procs := processes(fl.UID)[victim.Name]
	if len(procs) != 1 {
		t.Fatalf("member %s: %d processes", victim.Name, len(procs))
	}
	if err := syscall.Kill(procs[0].pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill member %s's process %d: %v", victim.Name, procs[0].pid, err)
	}
	waitFor(t, f.ctx, "the killed member back", converge, func() bool {
		p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, victim.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		ps := processes(fl.UID)[victim.Name]
		return p.Status.ContainerStatuses[0].RestartCount > victim.Status.ContainerStatuses[0].RestartCount &&
			podReady(p) && len(ps) == 1 && ps[0].pid != procs[0].pid
	})
	after, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, victim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != victim.UID {
		t.Errorf("the killed member's Pod was replaced (%s -> %s): it must restart in place, not be healed", victim.UID, after.UID)
	}
	if d := f.disks(fl)["data-"+victim.Name]; d.claimUID != disksBefore["data-"+victim.Name].claimUID || d.dir != disksBefore["data-"+victim.Name].dir {
		t.Errorf("the killed member came back on %+v, want its own disk %+v", d, disksBefore["data-"+victim.Name])
	}
	for _, p := range f.members(fl) {
		for _, b := range before {
			if b.Name == p.Name && b.UID != p.UID {
				t.Errorf("member %s was replaced after another member's container was killed", p.Name)
			}
		}
	}
	f.checkMembersRun(f.waitConverged(fl.Name), "v2")

	t.Log("delete the fleet")
	dirs := f.disks(fl)
	pods := f.recordPods()
	claims := f.recordClaims()
	f.deleteFleet(fl.Name)
	waitFor(t, f.ctx, "the deleted fleet's folders removed from disk", converge, func() bool {
		for _, d := range dirs {
			if _, err := os.Stat(d.dir); err == nil {
				return false
			}
		}
		return true
	})
	if procs := processes(fl.UID); len(procs) != 0 {
		t.Errorf("celld processes of the deleted fleet still run: %v", keys(procs))
	}
	lastPodGone, firstClaimGone := lastDeletion(pods.Events(t), fl.Name), firstDeletion(claims.Events(t))
	if firstClaimGone.IsZero() || lastPodGone.IsZero() || firstClaimGone.Before(lastPodGone) {
		t.Errorf("a claim was deleted at %s, before the last member's Pod was gone at %s", firstClaimGone.Format(time.StampMilli), lastPodGone.Format(time.StampMilli))
	}
	for name, d := range bystanderDisks {
		if _, err := os.Stat(d.dir); err != nil {
			t.Errorf("the other fleet's disk %s (%s) is gone: %v", name, d.dir, err)
		}
	}
	other.checkMembersRun(other.waitConverged(bystander.Name), "v1")
	f.verify()
	other.verify()
}

func waitFor(t *testing.T, ctx context.Context, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(context.Context) (bool, error) { return ok(), nil }); err != nil {
		t.Fatalf("%s: not within %s", what, timeout)
	}
}

// mostAwayAtOnce replays the Pod events of a fleet named fleet of size members and returns the most
// members that were away at any one moment. A member is away from the moment its Pod is deleted
// (or goes), or its container restarts, until that Pod and container are seen Ready: it has not
// yet recovered. A member whose celld runs on and answers not ready is not away: celld reports
// not ready on the survivors of a member that just left, while they hold the only live copy of
// some of its keys (cmd/celld), and a probe fast enough to see it must not count them as taken.
func mostAwayAtOnce(evs []seen, fleet string, members int) int {
	type instance struct {
		uid       types.UID
		restarts  int32
		recovered bool
	}
	at := map[string]instance{}
	most := 0
	started := false
	for _, e := range evs {
		p, ok := e.Obj.(*corev1.Pod)
		if !ok || !strings.HasPrefix(p.Name, fleet+"-") {
			continue
		}
		was, known := at[p.Name]
		now := instance{uid: p.UID, restarts: restarts(p)}
		if known && was.uid == now.uid && was.restarts == now.restarts {
			now.recovered = was.recovered
		}
		gone := e.Type == watch.Deleted || p.DeletionTimestamp != nil
		now.recovered = !gone && containersRunning(p) && (now.recovered || podReady(p))
		at[p.Name] = now
		n := 0
		for _, m := range at {
			if m.recovered {
				n++
			}
		}
		if n == members {
			started = true
		}
		if started && members-n > most {
			most = members - n
		}
	}
	return most
}

// containersRunning: every container of the Pod has started and not ended (a crashed one shows
// terminated or waiting before its restart count grows).
func containersRunning(p *corev1.Pod) bool {
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) > 0
}

func lastDeletion(evs []seen, fleet string) time.Time {
	var last time.Time
	for _, e := range evs {
		if p, ok := e.Obj.(*corev1.Pod); ok && e.Type == watch.Deleted && strings.HasPrefix(p.Name, fleet+"-") && e.At.After(last) {
			last = e.At
		}
	}
	return last
}

func firstDeletion(evs []seen) time.Time {
	var first time.Time
	for _, e := range evs {
		c, ok := e.Obj.(*corev1.PersistentVolumeClaim)
		if !ok || !(e.Type == watch.Deleted || c.DeletionTimestamp != nil) {
			continue
		}
		// When the watch saw it, as for the Pods: the API server's timestamps are whole seconds.
		if first.IsZero() || e.At.Before(first) {
			first = e.At
		}
	}
	return first
}

// nodesUp counts the nodes a member may be placed on: Ready, and not fenced.
func (f *fixture) nodesUp() int {
	f.t.Helper()
	l, err := suite.kube.CoreV1().Nodes().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatalf("list nodes: %v", err)
	}
	up := 0
	for _, n := range l.Items {
		fenced := false
		for _, taint := range n.Spec.Taints {
			fenced = fenced || taint.Key == "node.kubernetes.io/out-of-service"
		}
		if nodeReady(&n) && !fenced {
			up++
		}
	}
	return up
}

// upgrade rolls the fleet's members to the v2 image and waits until every member runs it, judging
// that the rolling update took at most one member away at a time.
func (f *fixture) upgrade(fl *v1alpha1.CelldFleet) *v1alpha1.CelldFleet {
	f.t.Helper()
	pods := f.recordPods()
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Image = celldImageV2 })
	members := int(fl.Spec.Members)
	waitFor(f.t, f.ctx, "every member on v2", converge, func() bool {
		ps := processes(fl.UID)
		for _, m := range ps {
			if len(m) != 1 || m[0].build != "v2" {
				return false
			}
		}
		return len(ps) == members
	})
	fl = f.waitConverged(fl.Name)
	f.checkMembersRun(fl, "v2")
	if most := mostAwayAtOnce(pods.Events(f.t), fl.Name, members); most > 1 {
		f.t.Errorf("the rolling upgrade had %d members away at once, want at most 1", most)
	}
	return fl
}
