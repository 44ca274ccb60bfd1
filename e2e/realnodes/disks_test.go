package realnodes

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/celldstore"
	"github.com/celld/celld-operator/render"
)

// expandableClass is cluster/real.sh's StorageClass whose volumes grow online: the stand-in CSI
// driver (cmd/celld-csi) behind Kubernetes' external-provisioner and external-resizer, xfs on a
// loop device. xfs refuses filesystems under 300MB, so the disks start at 512Mi; ext4, which
// would start smaller, grows online only with CAP_SYS_RESOURCE, which this machine withholds.
const expandableClass = "celld-csi-expandable"

var (
	diskBefore = resource.MustParse("512Mi")
	diskAfter  = resource.MustParse("1Gi")
)

// memberDisk asks a member's process for its data disk as it sees it (statfs of its data folder).
func memberDisk(ctx context.Context, pod *corev1.Pod) (celldstore.Disk, error) {
	var d celldstore.Disk
	if pod.Status.PodIP == "" {
		return d, fmt.Errorf("member %s has no address", pod.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(pod.Status.PodIP, "7000")+"/v1/disk", nil)
	if err != nil {
		return d, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return d, fmt.Errorf("member %s: %w", pod.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return d, fmt.Errorf("member %s: GET /v1/disk: %s", pod.Name, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return d, fmt.Errorf("member %s: GET /v1/disk: %w", pod.Name, err)
	}
	return d, nil
}

// grown tells whether a filesystem of total bytes is one made for, or grown to, size: what
// statfs shows is the device less the filesystem's own log and metadata (xfs: 448MiB of 512Mi,
// 960MiB of 1Gi), and more than 80% of it, which 512Mi is not of 1Gi.
func grown(total int64, size resource.Quantity) bool {
	return float64(total) >= 0.8*float64(size.Value()) && total <= size.Value()
}

func mib(b int64) string { return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20)) }

// expandableFleet is a PersistentFleet of n members on the expandable class at diskBefore.
func (f *fixture) expandableFleet(name string, n int32) *v1alpha1.CelldFleet {
	fl := f.newFleet(name, v1alpha1.ProfilePersistentFleet, n)
	fl.Spec.Storage = &v1alpha1.StorageSpec{StorageClassName: expandableClass, Size: diskBefore}
	return fl
}

// podSnapshot is what must not change while disks grow online: the Pod and its container runs.
type podSnapshot struct {
	uid      types.UID
	restarts int32
}

func (f *fixture) snapshot(fl *v1alpha1.CelldFleet) map[string]podSnapshot {
	out := map[string]podSnapshot{}
	for _, p := range f.members(fl) {
		s := podSnapshot{uid: p.UID}
		for _, c := range p.Status.ContainerStatuses {
			s.restarts += c.RestartCount
		}
		out[p.Name] = s
	}
	return out
}

// checkUndisturbed judges from the API server that no member Pod was replaced or restarted since
// before, and that the recorded Pod events hold no deletion of a member.
func (f *fixture) checkUndisturbed(fl *v1alpha1.CelldFleet, before map[string]podSnapshot, evs, workloads []seen) {
	f.t.Helper()
	// What the members' template asked for, in order: a change there is a rolling update.
	var asked []string
	for _, e := range workloads {
		if s, ok := e.Obj.(*appsv1.StatefulSet); ok {
			a := fmt.Sprintf("%s=%q", v1alpha1.AnnotationFilesystemResize, s.Spec.Template.Annotations[v1alpha1.AnnotationFilesystemResize])
			if len(asked) == 0 || asked[len(asked)-1] != a {
				asked = append(asked, a)
			}
		}
	}
	f.t.Logf("the StatefulSet's Pod template over the resize: %s", strings.Join(asked, " -> "))
	now := f.snapshot(fl)
	if len(now) != len(before) {
		f.t.Errorf("members %v, before the resize %v", keys(now), keys(before))
	}
	for name, b := range before {
		a, ok := now[name]
		switch {
		case !ok:
			f.t.Errorf("member %s is gone", name)
		case a.uid != b.uid:
			f.t.Errorf("member %s's Pod was replaced (%s -> %s): a disk that grows online needs no new Pod", name, b.uid, a.uid)
		case a.restarts != b.restarts:
			f.t.Errorf("member %s's container restarted (%d -> %d times): a disk that grows online needs no restart", name, b.restarts, a.restarts)
		}
	}
	for _, e := range evs {
		if p, ok := e.Obj.(*corev1.Pod); ok && strings.HasPrefix(p.Name, fl.Name+"-") &&
			(e.Type == watch.Deleted || p.DeletionTimestamp != nil) {
			f.t.Errorf("member Pod %s (%s) was deleted at %s", p.Name, p.UID, e.At.Format(time.StampMilli))
			break
		}
	}
}

// waitDisksGrown waits until every member's process sees its filesystem at size, and returns
// when each was first seen so.
func (f *fixture) waitDisksGrown(fl *v1alpha1.CelldFleet, size resource.Quantity, since time.Time) map[string]time.Duration {
	f.t.Helper()
	seenAt := map[string]time.Duration{}
	last := map[string]string{}
	states := map[string]bool{}
	defer func() {
		var seen []string
		for s := range states {
			seen = append(seen, s)
		}
		sort.Strings(seen)
		f.t.Logf("status.disks while the disks grew (claim: resize, capacity): %s", strings.Join(seen, "; "))
	}()
	waitFor(f.t, f.ctx, "every member's filesystem at "+size.String(), converge, func() bool {
		if cur, err := suite.celld.CelldV1alpha1().CelldFleets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{}); err == nil && cur.Status.Disks != nil {
			for _, c := range cur.Status.Disks.Claims {
				states[fmt.Sprintf("%s: %q, %s", c.Claim, c.Resize, c.Capacity)] = true
			}
		}
		pods := f.members(fl)
		for i := range pods {
			p := &pods[i]
			if _, ok := seenAt[p.Name]; ok {
				continue
			}
			d, err := memberDisk(f.ctx, p)
			if err != nil {
				last[p.Name] = err.Error()
				continue
			}
			last[p.Name] = mib(d.TotalBytes)
			if grown(d.TotalBytes, size) {
				seenAt[p.Name] = time.Since(since)
				f.t.Logf("member %s sees its filesystem at %s (%s available) after %s", p.Name, mib(d.TotalBytes),
					mib(d.AvailableBytes), seenAt[p.Name].Round(100*time.Millisecond))
			}
		}
		return len(pods) == int(fl.Spec.Members) && len(seenAt) == len(pods)
	})
	return seenAt
}

// checkClaims judges the claims from the API server: each at size, no resize condition left, and
// the fleet's status saying so for every member.
func (f *fixture) checkClaims(fl *v1alpha1.CelldFleet, size resource.Quantity) {
	f.t.Helper()
	claims, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatalf("list claims: %v", err)
	}
	for _, c := range claims.Items {
		if !strings.HasPrefix(c.Name, "data-"+fl.Name+"-") {
			continue
		}
		got := c.Status.Capacity[corev1.ResourceStorage]
		if got.Cmp(size) != 0 {
			f.t.Errorf("claim %s has %s, want %s", c.Name, got.String(), size.String())
		}
		for _, cond := range c.Status.Conditions {
			if cond.Status == corev1.ConditionTrue {
				f.t.Errorf("claim %s still has condition %s: %s", c.Name, cond.Type, cond.Message)
			}
		}
	}
	cur, err := suite.celld.CelldV1alpha1().CelldFleets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("get fleet %s: %v", fl.Name, err)
	}
	// status.disks lists the claims only while a resize is on its way: once done, it is gone.
	if d := cur.Status.Disks; d != nil && (len(d.Claims) > 0 || len(d.Larger) > 0) {
		f.t.Errorf("the fleet's status.disks still shows a resize once every claim has grown: %+v", d)
	}
	if meta := findCondition(cur.Status.Conditions, v1alpha1.ConditionDisksResizing); meta != nil && meta.Status == metav1.ConditionTrue {
		f.t.Errorf("the fleet is still DisksResizing: %s", meta.Message)
	}
}

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// checkNoWriteLost stops the load and reads back every acknowledged write.
func (f *fixture) checkNoWriteLost(fl *v1alpha1.CelldFleet, run *loadRun) {
	f.t.Helper()
	rep := f.check(fl, run)
	f.t.Logf("writes: %d acknowledged, %d refused or failed, %d checked, %d lost", run.stats.Acked, run.stats.Failed, rep.Checked, len(rep.Lost))
	if rep.Checked == 0 || rep.Checked != run.stats.Acked {
		f.t.Errorf("checked %d writes, the load client had %d acknowledged", rep.Checked, run.stats.Acked)
	}
	if len(rep.Lost) != 0 {
		f.t.Errorf("%d acknowledged writes lost:\n%s", len(rep.Lost), rep)
	}
}

// TestDisksGrowOnRealNodes grows a PersistentFleet's disks while the load client writes: the
// operator enlarges the claims, Kubernetes' external-resizer has the CSI driver enlarge each
// volume, and each kubelet has the driver grow the mounted filesystem. Each member's own process
// must see the new size, with no member Pod deleted or restarted, no acknowledged write lost, and
// the contract's judge silent.
func TestDisksGrowOnRealNodes(t *testing.T) {
	f := newFixture(t)
	start := time.Now()
	fl := f.waitConverged(f.create(f.expandableFleet("grow", 3)).Name)
	t.Logf("a fleet of 3 on %s at %s converged in %s", expandableClass, diskBefore.String(), time.Since(start).Round(time.Second))
	for _, p := range f.members(fl) {
		d, err := memberDisk(f.ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("member %s on %s sees its filesystem at %s (%s available)", p.Name, p.Spec.NodeName, mib(d.TotalBytes), mib(d.AvailableBytes))
		if !grown(d.TotalBytes, diskBefore) {
			t.Fatalf("member %s's filesystem is %s, not one of %s", p.Name, mib(d.TotalBytes), diskBefore.String())
		}
	}

	run := f.startLoad(fl)
	waitFor(t, f.ctx, "the first acknowledged writes", time.Minute, func() bool { return journalLen(run) > 50 })
	before := f.snapshot(fl)
	pods, sets := f.recordPods(), f.recordStatefulSets()

	t.Logf("grow the disks %s -> %s", diskBefore.String(), diskAfter.String())
	grownAt := time.Now()
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Storage.Size = diskAfter })
	seenAt := f.waitDisksGrown(fl, diskAfter, grownAt)
	var slowest time.Duration
	for _, d := range seenAt {
		slowest = max(slowest, d)
	}
	t.Logf("every member saw its grown filesystem within %s of the change", slowest.Round(100*time.Millisecond))
	fl = f.waitConverged(fl.Name)
	t.Logf("the fleet converged again %s after the change", time.Since(grownAt).Round(time.Second))
	// Writes keep landing on the grown disks before the check.
	time.Sleep(5 * time.Second)
	f.checkUndisturbed(fl, before, pods.Events(t), sets.Events(t))
	f.checkClaims(fl, diskAfter)
	f.checkNoWriteLost(fl, run)
	f.verify()
}

// fill takes a member's disk down to less than its process needs to serve, as writes that never
// stop would: a ballast file in its data folder, reached through the process's own root.
func fill(t *testing.T, m member, leave int64) string {
	t.Helper()
	dir := filepath.Join("/proc", fmt.Sprint(m.pid), "root", render.DataMountPath)
	var s syscall.Statfs_t
	if err := syscall.Statfs(dir, &s); err != nil {
		t.Fatalf("statfs member %s's data folder %s: %v", m.name, dir, err)
	}
	avail := int64(s.Bavail) * int64(s.Bsize)
	ballast := filepath.Join(dir, "ballast")
	fh, err := os.OpenFile(ballast, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatalf("ballast on member %s's disk: %v", m.name, err)
	}
	defer fh.Close()
	if err := syscall.Fallocate(int(fh.Fd()), 0, 0, avail-leave); err != nil {
		t.Fatalf("fill member %s's disk with %s: %v", m.name, mib(avail-leave), err)
	}
	if err := fh.Sync(); err != nil {
		t.Fatalf("ballast on member %s's disk: %v", m.name, err)
	}
	return ballast
}

// TestFullDiskMemberRecoversWhenGrown fills one member's disk until it stops being ready, then
// grows the fleet's disks: the resize goes ahead with that member down, and the member comes back
// ready on its own, in the same Pod, with nobody deleting anything.
func TestFullDiskMemberRecoversWhenGrown(t *testing.T) {
	f := newFixture(t)
	fl := f.waitConverged(f.create(f.expandableFleet("full", 3)).Name)
	run := f.startLoad(fl)
	waitFor(t, f.ctx, "the first acknowledged writes", time.Minute, func() bool { return journalLen(run) > 50 })
	before := f.snapshot(fl)
	pods, sets := f.recordPods(), f.recordStatefulSets()

	victim := fl.Name + "-1"
	ps := processes(fl.UID)[victim]
	if len(ps) != 1 {
		t.Fatalf("member %s: %d processes", victim, len(ps))
	}
	filledAt := time.Now()
	fill(t, ps[0], 512<<10)
	waitFor(t, f.ctx, "the full member not Ready", 2*time.Minute, func() bool {
		p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, victim, metav1.GetOptions{})
		return err == nil && !podReady(p)
	})
	p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, victim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := memberDisk(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("member %s not Ready %s after its disk was filled: %s of %s available",
		victim, time.Since(filledAt).Round(100*time.Millisecond), mib(d.AvailableBytes), mib(d.TotalBytes))

	t.Logf("grow the disks %s -> %s with %s down", diskBefore.String(), diskAfter.String(), victim)
	grownAt := time.Now()
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Storage.Size = diskAfter })
	f.waitDisksGrown(fl, diskAfter, grownAt)
	waitFor(t, f.ctx, "the full member Ready again", converge, func() bool {
		p, err := suite.kube.CoreV1().Pods(f.ns).Get(f.ctx, victim, metav1.GetOptions{})
		return err == nil && podReady(p)
	})
	t.Logf("member %s Ready again %s after the disks were grown", victim, time.Since(grownAt).Round(100*time.Millisecond))
	fl = f.waitConverged(fl.Name)
	time.Sleep(5 * time.Second)
	f.checkUndisturbed(fl, before, pods.Events(t), sets.Events(t))
	f.checkClaims(fl, diskAfter)
	f.checkNoWriteLost(fl, run)
	f.verify()
}

// restartClass is cluster/real.sh's ext4 class: this machine withholds CAP_SYS_RESOURCE, which
// ext4's online growth needs, so the kubelet's online NodeExpandVolume fails and the filesystem
// grows only when the volume is staged again: a class whose members must start again.
const restartClass = "celld-csi-ext4"

// TestDisksGrowThroughRestartsOnRealNodes grows a PersistentFleet's disks on a class whose
// filesystem grows only once its member starts again, from 64Mi to 256Mi while the load client
// writes: the operator restarts the members through the StatefulSet's rolling update, never
// more than one away at a time, each member's process then sees the new size, and no
// acknowledged write is lost.
func TestDisksGrowThroughRestartsOnRealNodes(t *testing.T) {
	from, to := resource.MustParse("64Mi"), resource.MustParse("256Mi")
	f := newFixture(t)
	spec := f.newFleet("ext", v1alpha1.ProfilePersistentFleet, 3)
	spec.Spec.Storage = &v1alpha1.StorageSpec{StorageClassName: restartClass, Size: from}
	fl := f.waitConverged(f.create(spec).Name)
	for _, p := range f.members(fl) {
		d, err := memberDisk(f.ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("member %s sees its filesystem at %s", p.Name, mib(d.TotalBytes))
	}
	run := f.startLoad(fl)
	waitFor(t, f.ctx, "the first acknowledged writes", time.Minute, func() bool { return journalLen(run) > 50 })
	before := f.snapshot(fl)
	pods, sets := f.recordPods(), f.recordStatefulSets()
	t.Logf("grow the disks %s -> %s", from.String(), to.String())
	grownAt := time.Now()
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Storage.Size = to })
	f.waitDisksGrown(fl, to, grownAt)
	fl = f.waitConverged(fl.Name)
	t.Logf("the fleet converged again %s after the change", time.Since(grownAt).Round(time.Second))
	time.Sleep(5 * time.Second)
	replaced := 0
	for _, p := range f.members(fl) {
		if b, ok := before[p.Name]; ok && b.uid != p.UID {
			replaced++
		}
	}
	var asked []string
	for _, e := range sets.Events(t) {
		if s, ok := e.Obj.(*appsv1.StatefulSet); ok {
			a := s.Spec.Template.Annotations[v1alpha1.AnnotationFilesystemResize]
			if len(asked) == 0 || asked[len(asked)-1] != a {
				asked = append(asked, a)
			}
		}
	}
	t.Logf("%d of %d members started again; the template's %s went %q", replaced, len(before), v1alpha1.AnnotationFilesystemResize, asked)
	if most := mostAwayAtOnce(pods.Events(t), fl.Name, int(fl.Spec.Members)); most > 1 {
		t.Errorf("the restarts had %d members away at once, want at most 1", most)
	}
	f.checkClaims(fl, to)
	f.checkNoWriteLost(fl, run)
	f.verify()
}
