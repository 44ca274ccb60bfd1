package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/machine"
)

// expansionClass is the class kwok's volume stages provision (and the only one they do).
const expansionClass = "kwok-volume"

// resizer plays the external resizer and the kubelet on kwok, which run neither: a bound claim
// that asks for more than it has gets the new capacity, unless the test says its expansion fails
// or leaves its filesystem pending.
type resizer struct {
	mu      sync.Mutex
	fail    map[string]bool
	pending map[string]bool
}

func (r *resizer) set(claim string, fail, pending bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail[claim], r.pending[claim] = fail, pending
}

func (r *resizer) run(ctx context.Context, t *testing.T, ns string) {
	c := suite.kube.CoreV1().PersistentVolumeClaims(ns)
	_ = wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		l, err := c.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for i := range l.Items {
			pvc := &l.Items[i]
			if pvc.Status.Phase != corev1.ClaimBound {
				continue
			}
			want, have := pvc.Spec.Resources.Requests[corev1.ResourceStorage], pvc.Status.Capacity[corev1.ResourceStorage]
			next := have.DeepCopy()
			if want.Cmp(have) > 0 {
				next = want.DeepCopy()
			}
			var conds []corev1.PersistentVolumeClaimCondition
			switch {
			case r.fail[pvc.Name] && want.Cmp(have) > 0:
				next = have.DeepCopy()
				conds = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimControllerResizeError, Status: corev1.ConditionTrue,
					Message: "resize volume: the volume's quota is exhausted"}}
			case r.pending[pvc.Name]:
				conds = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue,
					Message: "Waiting for user to (re-)start a pod to finish file system resize of volume on node."}}
			}
			if next.Cmp(have) == 0 && slices.EqualFunc(conds, pvc.Status.Conditions, func(a, b corev1.PersistentVolumeClaimCondition) bool {
				return a.Type == b.Type && a.Status == b.Status
			}) {
				continue
			}
			pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: next}
			pvc.Status.Conditions = conds
			if _, err := c.UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
				t.Logf("resizer: claim %s: %v", pvc.Name, err)
			}
		}
		return false, nil
	})
}

// setExpansion sets allowVolumeExpansion on kwok's class, and puts it back as it was at the end.
func setExpansion(t *testing.T, allow bool) {
	t.Helper()
	c := suite.kube.StorageV1().StorageClasses()
	sc, err := c.Get(context.Background(), expansionClass, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("storage class %s: %v", expansionClass, err)
	}
	was := sc.AllowVolumeExpansion
	body := fmt.Sprintf(`{"allowVolumeExpansion":%t}`, allow)
	if _, err := c.Patch(context.Background(), expansionClass, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatalf("storage class %s: allowVolumeExpansion=%t: %v", expansionClass, allow, err)
	}
	t.Cleanup(func() {
		back := `{"allowVolumeExpansion":null}`
		if was != nil {
			back = fmt.Sprintf(`{"allowVolumeExpansion":%t}`, *was)
		}
		_, _ = c.Patch(context.Background(), expansionClass, types.MergePatchType, []byte(back), metav1.PatchOptions{})
	})
}

// claimSizes are the fleet's claims' storage requests, by name.
func (f *fixture) claimSizes(fl *v1alpha1.CelldFleet) map[string]resource.Quantity {
	f.t.Helper()
	l, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).List(f.ctx, metav1.ListOptions{LabelSelector: memberSelector(fl)})
	if err != nil {
		f.t.Fatalf("list claims of %s: %v", fl.Name, err)
	}
	out := map[string]resource.Quantity{}
	for _, c := range l.Items {
		out[c.Name] = c.Spec.Resources.Requests[corev1.ResourceStorage]
	}
	return out
}

func memberUIDs(pods []corev1.Pod) map[string]types.UID {
	out := map[string]types.UID{}
	for _, p := range pods {
		out[p.Name] = p.UID
	}
	return out
}

// disksAt: the fleet is converged, says no resize is on its way and nothing Degraded, each of its
// claims (as many as given) asks for and has at least size, and so does each claim its status
// names. The status must speak of the claims seen: a status written before they grew (the
// Degraded one of a class that forbade expansion, for the same generation) is no answer.
func (f *fixture) disksAt(size string, claims int) func(*v1alpha1.CelldFleet) bool {
	want := resource.MustParse(size)
	atLeast := func(q string) bool {
		got, err := resource.ParseQuantity(q)
		return err == nil && got.Cmp(want) >= 0
	}
	return func(fl *v1alpha1.CelldFleet) bool {
		if !converged(fl) || condition(fl, v1alpha1.ConditionDisksResizing).Status != "absent" ||
			condition(fl, v1alpha1.ConditionDegraded).Status == metav1.ConditionTrue {
			return false
		}
		if d := fl.Status.Disks; d != nil {
			for _, c := range d.Claims {
				if !atLeast(c.Requested) || !atLeast(c.Capacity) {
					return false
				}
			}
		}
		l, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).List(f.ctx, metav1.ListOptions{LabelSelector: memberSelector(fl)})
		if err != nil || len(l.Items) != claims {
			return false
		}
		for _, c := range l.Items {
			req, capa := c.Spec.Resources.Requests[corev1.ResourceStorage], c.Status.Capacity[corev1.ResourceStorage]
			if req.Cmp(want) < 0 || capa.Cmp(want) < 0 {
				return false
			}
		}
		return true
	}
}

// TestDisksGrow grows a PersistentFleet's disks on the API server, with the test playing the
// resizer: a class that forbids expansion (Degraded, nothing changed), a claim someone enlarged
// past the spec (kept), the growth itself (every claim raised, the StatefulSet created again with
// the new claim template, no member deleted or replaced), an operator killed mid-resize while the
// fleet also grows in members (the new member's disk reaches the new size), a filesystem left
// pending and an expansion that fails (each named in status with its member), and the way back.
func TestDisksGrow(t *testing.T) {
	f := newFixture(t)
	setExpansion(t, false)
	op := f.startOperator()
	fl := f.newFleet("disks", v1alpha1.ProfilePersistentFleet, 3)
	fl.Spec.Capacity.ScaleInStabilization = duration(0)
	fl = f.create(fl)
	f.waitConverged(fl.Name)
	pods := f.recordPods()
	before := memberUIDs(f.members(fl))
	setUID := f.statefulSet(fl.Name).UID

	// A class that forbids expansion: Degraded, naming the class; no claim changes.
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Storage.Size = resource.MustParse("2Gi") })
	f.waitFleet(fl.Name, converge, "Degraded StorageClassNotExpandable", func(fl *v1alpha1.CelldFleet) bool {
		c := condition(fl, v1alpha1.ConditionDegraded)
		return c.Status == metav1.ConditionTrue && c.Reason == machine.ReasonStorageClassNotExpandable && strings.Contains(c.Message, expansionClass)
	})
	for name, q := range f.claimSizes(fl) {
		if q.Cmp(resource.MustParse("1Gi")) != 0 {
			t.Errorf("claim %s asks for %s while the class forbids expansion; want it left at 1Gi", name, q.String())
		}
	}
	if s := f.statefulSet(fl.Name); s.UID != setUID {
		t.Errorf("the StatefulSet was created again while its claims could not grow")
	}

	// The class allows it; someone enlarges one claim past the spec at the same time.
	ctx, stop := context.WithCancel(f.ctx)
	defer stop()
	r := &resizer{fail: map[string]bool{}, pending: map[string]bool{}}
	go r.run(ctx, t, f.ns)
	setExpansion(t, true)
	larger := "data-disks-0"
	if err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Patch(ctx, larger, types.MergePatchType,
			[]byte(`{"spec":{"resources":{"requests":{"storage":"3Gi"}}}}`), metav1.PatchOptions{})
		return err == nil, nil // the API server's class cache may lag the patch above
	}); err != nil {
		t.Fatalf("resize %s by hand: %v", larger, err)
	}
	got := f.waitFleet(fl.Name, converge, "every claim at 2Gi at least", f.disksAt("2Gi", 3))
	if d := got.Status.Disks; d == nil || !slices.Equal(d.Larger, []string{larger}) || d.Size != "2Gi" || len(d.Claims) != 3 {
		t.Errorf("status.disks %+v; want size 2Gi, the 3 claims, and [%s] larger", d, larger)
	}
	sizes := f.claimSizes(fl)
	for name, want := range map[string]string{larger: "3Gi", "data-disks-1": "2Gi", "data-disks-2": "2Gi"} {
		if q := sizes[name]; q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("claim %s asks for %s; want %s", name, q.String(), want)
		}
	}
	f.waitFleet(fl.Name, converge, "the StatefulSet created again with claims of 2Gi", func(*v1alpha1.CelldFleet) bool {
		s, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
		if err != nil || s.UID == setUID || len(s.Spec.VolumeClaimTemplates) != 1 {
			return false
		}
		q := s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]
		return q.Cmp(resource.MustParse("2Gi")) == 0
	})
	f.waitConverged(fl.Name)
	f.checkMembersKept(fl, before, pods)
	f.checkEvents(fl.Name, "DiskResizeStarted", "DiskResized")

	// The operator is killed with a resize asked for, and the fleet grows in members with it.
	op.kill()
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) {
		fl.Spec.Storage.Size = resource.MustParse("4Gi")
		fl.Spec.Members = 4
	})
	f.startOperator()
	if got := f.waitFleet(fl.Name, converge, "4 members, every claim at 4Gi at least", f.disksAt("4Gi", 4)); got.Status.Disks != nil {
		// Every claim at the size: the status shows no disks, so a fleet at rest costs no write.
		t.Errorf("status.disks %+v with every claim at the size; want none", got.Status.Disks)
	}
	f.checkMembersKept(fl, before, pods)

	// An expansion that fails: said with its claim and member; no member restarts for it.
	r.set("data-disks-2", true, false)
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Storage.Size = resource.MustParse("5Gi") })
	st := f.waitFleet(fl.Name, converge, "DisksResizing ExpansionFailed naming data-disks-2", func(fl *v1alpha1.CelldFleet) bool {
		c := condition(fl, v1alpha1.ConditionDisksResizing)
		return c.Status == metav1.ConditionTrue && c.Reason == machine.ReasonExpansionFailed && strings.Contains(c.Message, "data-disks-2")
	})
	if i := slices.IndexFunc(st.Status.Disks.Claims, func(c v1alpha1.ClaimSize) bool { return c.Claim == "data-disks-2" }); i < 0 ||
		st.Status.Disks.Claims[i].Resize != "ExpansionFailed" || st.Status.Disks.Claims[i].Member != "disks-2" {
		t.Errorf("status.disks.claims %+v: want data-disks-2 ExpansionFailed, of member disks-2", st.Status.Disks.Claims)
	}
	r.set("data-disks-2", false, false)
	f.waitFleet(fl.Name, converge, "every claim at 5Gi at least", f.disksAt("5Gi", 4))
	f.checkMembersKept(fl, before, pods)

	// A filesystem that grows only when its volume is mounted again: the workload's rolling
	// update restarts the members (the operator deletes none), once, and the kubelet (here the
	// test) then grows it.
	r.set("data-disks-1", false, true)
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Storage.Size = resource.MustParse("6Gi") })
	f.waitFleet(fl.Name, converge, "DisksResizing naming the pending filesystem", func(fl *v1alpha1.CelldFleet) bool {
		c := condition(fl, v1alpha1.ConditionDisksResizing)
		return c.Status == metav1.ConditionTrue && c.Reason == machine.ReasonDisksExpanding && strings.Contains(c.Message, "data-disks-1 (FileSystemResizePending")
	})
	f.waitFleet(fl.Name, converge, "the members' template asks for the restart", func(*v1alpha1.CelldFleet) bool {
		s, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
		return err == nil && s.Spec.Template.Annotations[v1alpha1.AnnotationFilesystemResize] == "6Gi"
	})
	restarted := f.waitFleet(fl.Name, converge, "every member restarted by the rollout", func(fl *v1alpha1.CelldFleet) bool {
		if !converged(fl) {
			return false
		}
		for name, uid := range memberUIDs(f.members(fl)) {
			if before[name] == uid {
				return false
			}
		}
		return true
	})
	r.set("data-disks-1", false, false)
	f.waitFleet(fl.Name, converge, "every claim at 6Gi at least", f.disksAt("6Gi", 4))
	if s := f.statefulSet(fl.Name); s.Spec.Template.Annotations[v1alpha1.AnnotationFilesystemResize] != "6Gi" {
		t.Errorf("the template's %s is %q after the restart; want it kept at 6Gi, so nothing rolls again",
			v1alpha1.AnnotationFilesystemResize, s.Spec.Template.Annotations[v1alpha1.AnnotationFilesystemResize])
	}
	after := memberUIDs(f.members(restarted))
	f.waitConverged(fl.Name)
	for name, uid := range memberUIDs(f.members(restarted)) {
		if after[name] != uid {
			t.Errorf("member %s replaced again once its filesystem grew", name)
		}
	}
	stop()
}

// checkMembersKept: every member the fleet had before still runs as the same Pod, and no Pod of
// the fleet was deleted.
func (f *fixture) checkMembersKept(fl *v1alpha1.CelldFleet, before map[string]types.UID, pods *recorder) {
	f.t.Helper()
	now := memberUIDs(f.members(fl))
	for name, uid := range before {
		if now[name] != uid {
			f.t.Errorf("member %s is Pod %s now, was %s: a resize replaced it", name, now[name], uid)
		}
	}
	if dels := deletions(pods.Events(f.t)); len(dels) != 0 {
		f.t.Errorf("member Pods deleted during the resize: %v", names(dels))
	}
}

// checkEvents: the fleet has an Event of each reason.
func (f *fixture) checkEvents(name string, reasons ...string) {
	f.t.Helper()
	l, err := suite.kube.CoreV1().Events(f.ns).List(f.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		f.t.Fatalf("events of %s: %v", name, err)
	}
	for _, want := range reasons {
		if !slices.ContainsFunc(l.Items, func(e corev1.Event) bool { return e.Reason == want }) {
			f.t.Errorf("fleet %s has no %s Event", name, want)
		}
	}
}
