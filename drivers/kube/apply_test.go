package kube

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/render"
)

func testFleet(profile v1alpha1.Profile) *v1alpha1.CelldFleet {
	f := &v1alpha1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team", UID: "uid-alpha", ResourceVersion: "7", Generation: 1},
		Spec: v1alpha1.CelldFleetSpec{
			Profile: profile, Members: 3, Image: "example.com/celld:1",
			Bucket: v1alpha1.BucketSpec{Name: "alpha-data", Region: "eu-west-1"},
		},
	}
	if profile == v1alpha1.ProfilePersistentFleet {
		f.Spec.Storage = &v1alpha1.StorageSpec{StorageClassName: "fast", Size: resource.MustParse("1Gi")}
	}
	return f
}

type fixture struct {
	kube  *kubefake.Clientset
	celld *celldfake.Clientset
	rec   *record.FakeRecorder
	ap    *Applier
}

func newFixture(objs ...runtime.Object) *fixture {
	var kubeObjs, celldObjs []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *v1alpha1.CelldFleet, *v1alpha1.CelldReservation:
			celldObjs = append(celldObjs, o)
		default:
			kubeObjs = append(kubeObjs, o)
		}
	}
	fx := &fixture{kube: kubefake.NewClientset(kubeObjs...), celld: celldfake.NewSimpleClientset(celldObjs...), rec: record.NewFakeRecorder(10)}
	fx.ap = &Applier{Kube: fx.kube, Celld: fx.celld, Recorder: fx.rec}
	return fx
}

// requests are the requests a fixture's clients received, reads included, in order.
func (fx *fixture) requests() []k8stesting.Action {
	return append(append([]k8stesting.Action{}, fx.kube.Actions()...), fx.celld.Actions()...)
}

func (fx *fixture) clear() {
	fx.kube.ClearActions()
	fx.celld.ClearActions()
}

// writesOf leaves out the reads: an apply reads its object first, to write only what is absent
// or the fleet's own.
func writesOf(reqs []k8stesting.Action) []k8stesting.Action {
	var out []k8stesting.Action
	for _, r := range reqs {
		if r.GetVerb() != "get" {
			out = append(out, r)
		}
	}
	return out
}

func only(t *testing.T, got []k8stesting.Action) k8stesting.Action {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("want one request, got %d: %v", len(got), got)
	}
	return got[0]
}

func TestApplyIsOneServerSideApplyPerObject(t *testing.T) {
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfileBucket, v1alpha1.ProfilePersistentFleet} {
		f := testFleet(profile)
		for _, obj := range render.Render(f, 3, -1).All() {
			fx := newFixture()
			m := obj.(metav1.Object)
			a := machine.Action{Kind: machine.Apply, Key: "apply/" + m.GetName(), Ref: kinds.Ref{Namespace: f.Namespace, Name: m.GetName()}, Object: obj}
			tg := &Target{Fleet: f}
			if err := fx.ap.Do(context.Background(), tg, a); err != nil {
				t.Fatalf("%s %T: %v", profile, obj, err)
			}
			// The loop decides its next sync on the answer while the caches lag: the object as
			// the server wrote it, stripped as the caches strip theirs.
			if len(tg.Answers) != 1 {
				t.Fatalf("%s %T: %d answers, want the server's one", profile, obj, len(tg.Answers))
			}
			if got := tg.Answers[0]; kinds.Of(got) != kinds.Of(obj) || got.GetName() != m.GetName() || len(got.GetManagedFields()) != 0 {
				t.Errorf("%s %T: answered %s %s at %q with %d managedFields entries; want the object written, stripped",
					profile, obj, kinds.Of(got), got.GetName(), got.GetResourceVersion(), len(got.GetManagedFields()))
			}
			p, ok := only(t, writesOf(fx.requests())).(k8stesting.PatchActionImpl)
			if !ok {
				t.Fatalf("%T: want a patch, got %T", obj, fx.requests()[0])
			}
			if p.PatchType != types.ApplyPatchType || p.PatchOptions.FieldManager != FieldManager ||
				p.PatchOptions.Force == nil || !*p.PatchOptions.Force || p.Name != m.GetName() || p.Namespace != f.Namespace {
				t.Errorf("%T: got %s %s/%s type=%s opts=%+v", obj, p.Verb, p.Namespace, p.Name, p.PatchType, p.PatchOptions)
			}
			var body map[string]any
			if err := json.Unmarshal(p.Patch, &body); err != nil {
				t.Fatal(err)
			}
			if body["apiVersion"] == nil || body["kind"] == nil {
				t.Errorf("%T: the apply configuration lacks its type: %s", obj, p.Patch)
			}
			if _, ok := body["status"]; ok || strings.Contains(string(p.Patch), "null") {
				t.Errorf("%T: the apply configuration claims status or null fields: %s", obj, p.Patch)
			}
		}
	}
}

func TestApplyResources(t *testing.T) {
	f := testFleet(v1alpha1.ProfilePersistentFleet)
	var got []string
	fx := newFixture()
	for _, obj := range render.Render(f, 3, -1).All() {
		if err := fx.ap.Do(context.Background(), &Target{Fleet: f}, machine.Action{Kind: machine.Apply, Object: obj, Ref: kinds.Ref{Namespace: f.Namespace}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range fx.requests() {
		got = append(got, r.GetVerb()+" "+r.GetResource().Resource)
	}
	// Each object read, then applied, at its kind's resource of the table, in apply order.
	var want string
	for _, obj := range render.Render(f, 3, -1).All() {
		r, _ := kinds.Lookup(kinds.Of(obj))
		want += " get " + r.Resource.Resource + " patch " + r.Resource.Resource
	}
	want = strings.TrimPrefix(want, " ")
	if !strings.HasPrefix(want, "get services patch services get services patch services get networkpolicies") ||
		!strings.Contains(want, "get poddisruptionbudgets patch poddisruptionbudgets") || !strings.HasSuffix(want, "get statefulsets patch statefulsets") {
		t.Fatalf("the table's order changed: %s", want)
	}
	if strings.Join(got, " ") != want {
		t.Errorf("applied %q, want %q", strings.Join(got, " "), want)
	}
}

func TestBindReservation(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	r := render.RenderReservation(f)
	bind := machine.Action{Kind: machine.BindReservation, Key: "bind", Ref: kinds.Ref{Namespace: f.Namespace, Name: r.Name}, Object: r}

	t.Run("creates", func(t *testing.T) {
		fx := newFixture()
		if err := fx.ap.Do(context.Background(), &Target{Fleet: f}, bind); err != nil {
			t.Fatal(err)
		}
		c, ok := only(t, fx.requests()).(k8stesting.CreateActionImpl)
		if !ok || c.GetResource().Resource != "celldreservations" || c.CreateOptions.FieldManager != FieldManager {
			t.Fatalf("got %#v", fx.requests()[0])
		}
	})
	t.Run("already bound to this fleet", func(t *testing.T) {
		fx := newFixture(r.DeepCopy())
		if err := fx.ap.Do(context.Background(), &Target{Fleet: f}, bind); err != nil {
			t.Fatalf("a reservation bound to the same UID must be success: %v", err)
		}
		verbs := verbsOf(fx.requests())
		if verbs != "create get" {
			t.Errorf("requests %q, want create then get", verbs)
		}
	})
	t.Run("bound to another fleet", func(t *testing.T) {
		other := r.DeepCopy()
		other.Spec.FleetUID, other.Spec.FleetName = "uid-other", "other"
		fx := newFixture(other)
		err := fx.ap.Do(context.Background(), &Target{Fleet: f}, bind)
		if err == nil || !strings.Contains(err.Error(), "team/other") || !strings.Contains(err.Error(), "uid-other") {
			t.Fatalf("want a refusal naming the other fleet, got %v", err)
		}
	})
}

func verbsOf(actions []k8stesting.Action) string {
	var out []string
	for _, a := range actions {
		v := a.GetVerb()
		if a.GetSubresource() != "" {
			v += "/" + a.GetSubresource()
		}
		out = append(out, v)
	}
	return strings.Join(out, " ")
}

func TestAppendHistoryRetriesOnConflict(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	r := render.RenderReservation(f)
	r.ResourceVersion = "1"
	fx := newFixture(r)
	conflicts := 1
	fx.celld.PrependReactor("update", "celldreservations", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "celld.io", Resource: "celldreservations"}, r.Name, nil)
		}
		return false, nil, nil
	})
	d := v1alpha1.CapacityDecision{Time: metav1.NewTime(time.Unix(100, 0)), Kind: v1alpha1.DecisionGrow, From: 3, To: 5, Source: v1alpha1.SourceManual}
	a := machine.Action{Kind: machine.AppendHistory, Key: "history", Ref: kinds.Ref{Namespace: r.Namespace, Name: r.Name}, Decisions: []v1alpha1.CapacityDecision{d}}
	if err := fx.ap.Do(context.Background(), &Target{Fleet: f}, a); err != nil {
		t.Fatal(err)
	}
	if got := verbsOf(fx.requests()); got != "get update/status get update/status" {
		t.Errorf("requests %q: a conflict must re-read and retry", got)
	}
	for _, req := range fx.requests() {
		if u, ok := req.(k8stesting.UpdateActionImpl); ok {
			if rv := u.Object.(*v1alpha1.CelldReservation).ResourceVersion; rv == "" {
				t.Errorf("status update without the resourceVersion it read")
			}
		}
	}
	got, err := fx.celld.CelldV1alpha1().CelldReservations(r.Namespace).Get(context.Background(), r.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := got.Status.CapacityHistory; len(h) != 1 || h[0].Kind != v1alpha1.DecisionGrow || h[0].To != 5 {
		t.Fatalf("history %+v", h)
	}

	// The same decision again (a cache that did not show the append yet) writes nothing.
	fx.clear()
	if err := fx.ap.Do(context.Background(), &Target{Fleet: f}, a); err != nil {
		t.Fatal(err)
	}
	if got := verbsOf(fx.requests()); got != "get" {
		t.Errorf("repeat append made requests %q, want only a read", got)
	}
}

func TestFinalizerPatches(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	f.Finalizers = []string{"example.com/keep"}
	fx := newFixture(f.DeepCopy())
	target := &Target{Fleet: f}
	if err := fx.ap.Do(context.Background(), target, machine.Action{Kind: machine.AddFinalizer}); err != nil {
		t.Fatal(err)
	}
	p, ok := only(t, fx.requests()).(k8stesting.PatchActionImpl)
	if !ok || p.PatchType != types.MergePatchType || p.GetResource().Resource != "celldfleets" || p.GetSubresource() != "" {
		t.Fatalf("want a merge patch of the fleet, got %#v", fx.requests()[0])
	}
	want := `{"metadata":{"finalizers":["example.com/keep","celld.io/fleet-protection"],"resourceVersion":"7"}}`
	if string(p.Patch) != want {
		t.Errorf("patch %s, want %s", p.Patch, want)
	}
	if target.Fleet == f {
		t.Errorf("the target still holds the cached fleet: a later status write would conflict with this patch")
	}

	fx.clear()
	withFin := f.DeepCopy()
	withFin.Finalizers = []string{"example.com/keep", v1alpha1.FleetFinalizer}
	if err := fx.ap.Do(context.Background(), &Target{Fleet: withFin}, machine.Action{Kind: machine.AddFinalizer}); err != nil {
		t.Fatal(err)
	}
	if len(fx.requests()) != 0 {
		t.Errorf("adding a present finalizer made requests: %v", fx.requests())
	}
	if err := fx.ap.Do(context.Background(), &Target{Fleet: withFin}, machine.Action{Kind: machine.RemoveFinalizer}); err != nil {
		t.Fatal(err)
	}
	p = only(t, fx.requests()).(k8stesting.PatchActionImpl)
	if want := `{"metadata":{"finalizers":["example.com/keep"],"resourceVersion":"7"}}`; string(p.Patch) != want {
		t.Errorf("patch %s, want %s", p.Patch, want)
	}
}

func TestDeletePodPreconditions(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "alpha-1", Namespace: "team", UID: "uid-pod", ResourceVersion: "42"}}
	for _, force := range []bool{false, true} {
		fx := newFixture(pod.DeepCopy())
		a := machine.Action{Kind: machine.DeletePod, Key: "heal", Ref: kinds.Ref{Namespace: "team", Name: "alpha-1"}, UID: "uid-pod", ResourceVersion: "42", Force: force}
		if force {
			// The node is gone: the premise's fresh read of it finds nothing.
			a.Premise = &machine.Premise{Node: "gone", NodeGone: true}
		}
		if err := fx.ap.Do(context.Background(), &Target{}, a); err != nil {
			t.Fatal(err)
		}
		var writes []k8stesting.Action
		for _, r := range fx.requests() {
			if r.GetVerb() != "get" {
				writes = append(writes, r)
			}
		}
		d, ok := only(t, writes).(k8stesting.DeleteActionImpl)
		if !ok || d.GetResource().Resource != "pods" || d.Name != "alpha-1" {
			t.Fatalf("got %#v", fx.requests()[0])
		}
		pre := d.DeleteOptions.Preconditions
		if pre == nil || pre.UID == nil || *pre.UID != "uid-pod" || pre.ResourceVersion == nil || *pre.ResourceVersion != "42" {
			t.Errorf("preconditions %+v, want UID and resourceVersion", pre)
		}
		grace := d.DeleteOptions.GracePeriodSeconds
		if force != (grace != nil && *grace == 0) {
			t.Errorf("force=%t: grace period %v", force, grace)
		}
	}
	fx := newFixture()
	if err := fx.ap.Do(context.Background(), &Target{}, machine.Action{Kind: machine.DeletePod, UID: "u", Ref: kinds.Ref{Namespace: "team", Name: "gone"}}); err != nil {
		t.Errorf("a Pod already gone is done: %v", err)
	}
}

// A heal counts once, for the delete that removed the member: the same heal sent again on a cache
// that has not seen the first, answered NotFound, deleted nothing and is not counted.
func TestHealCountedOnlyWhenItDeleted(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "alpha-1", Namespace: "team", UID: "uid-pod", ResourceVersion: "42"}}
	fx := newFixture(pod)
	var healed []string
	fx.ap.Healed = func(reason string) { healed = append(healed, reason) }
	heal := machine.Action{Kind: machine.DeletePod, Key: "heal", Ref: kinds.Ref{Namespace: "team", Name: "alpha-1"}, UID: "uid-pod", ResourceVersion: "42", Reason: "VolumeLost"}
	for i := range 2 {
		if err := fx.ap.Do(context.Background(), &Target{}, heal); err != nil {
			t.Fatalf("heal #%d: %v", i+1, err)
		}
	}
	if len(healed) != 1 || healed[0] != "VolumeLost" {
		t.Errorf("heals counted: %v; want one VolumeLost", healed)
	}
}

func TestDeleteDiskPrecondition(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-alpha-0", Namespace: "team", UID: "uid-pvc"}}
	fx := newFixture(pvc)
	a := machine.Action{Kind: machine.DeleteDisk, UID: "uid-pvc", ResourceVersion: "9", Ref: kinds.Ref{Namespace: "team", Name: "data-alpha-0"}}
	if err := fx.ap.Do(context.Background(), &Target{}, a); err != nil {
		t.Fatal(err)
	}
	d := only(t, fx.requests()).(k8stesting.DeleteActionImpl)
	if d.GetResource().Resource != "persistentvolumeclaims" || d.DeleteOptions.Preconditions == nil || *d.DeleteOptions.Preconditions.UID != "uid-pvc" {
		t.Errorf("got %#v", d)
	}
	if d.DeleteOptions.GracePeriodSeconds != nil {
		t.Errorf("a disk is never force-deleted")
	}
	if err := fx.ap.Do(context.Background(), &Target{}, a); err != nil {
		t.Errorf("a disk already gone is done: %v", err)
	}
}

// A claim some controller touched since the decision is deleted on the fresh read that
// confirmed it (its resourceVersion, not the decision's), so the delete is not refused and sent
// again; a claim replaced or relabelled since is never deleted.
func TestDeleteDiskOnTheConfirmedClaim(t *testing.T) {
	claim := func(uid, fleet string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-alpha-0", Namespace: "team", UID: types.UID(uid), ResourceVersion: "17",
			Labels: map[string]string{kinds.LabelFleetUID: fleet}}}
	}
	a := machine.Action{Kind: machine.DeleteDisk, Key: "disk/team/data-alpha-0/uid-pvc", Ref: kinds.Ref{Namespace: "team", Name: "data-alpha-0"},
		UID: "uid-pvc", ResourceVersion: "9", Premise: &machine.Premise{NoMembers: true, DiskOf: "uid-fleet", DiskUID: "uid-pvc"}}
	for _, tc := range []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		rv    string // the delete's resourceVersion precondition, "" when none is sent
	}{
		{"changed since the decision", claim("uid-pvc", "uid-fleet"), "17"},
		{"replaced under its name", claim("uid-other", "uid-fleet"), ""},
		{"relabelled to another fleet", claim("uid-pvc", "uid-other"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(tc.claim)
			err := fx.ap.Do(context.Background(), &Target{}, a)
			var deletes []k8stesting.DeleteActionImpl
			for _, r := range fx.requests() {
				if d, ok := r.(k8stesting.DeleteActionImpl); ok {
					deletes = append(deletes, d)
				}
			}
			if tc.rv == "" {
				if !errors.Is(err, machine.ErrPremiseChanged) || len(deletes) != 0 {
					t.Fatalf("err %v, %d deletes; want the premise refused and no delete", err, len(deletes))
				}
				return
			}
			if err != nil || len(deletes) != 1 {
				t.Fatalf("err %v, %d deletes; want one delete", err, len(deletes))
			}
			pre := deletes[0].DeleteOptions.Preconditions
			if pre == nil || pre.UID == nil || *pre.UID != "uid-pvc" || pre.ResourceVersion == nil || *pre.ResourceVersion != tc.rv {
				t.Errorf("preconditions %+v; want uid-pvc at resourceVersion %s", pre, tc.rv)
			}
		})
	}
	// A claim the fresh read finds going already (a step on a cache that had not seen this
	// delete) gets no second delete: the action holds.
	going := claim("uid-pvc", "uid-fleet")
	going.DeletionTimestamp, going.Finalizers = &metav1.Time{Time: time.Now()}, []string{"kubernetes.io/pvc-protection"}
	fx := newFixture(going)
	if err := fx.ap.Do(context.Background(), &Target{}, a); err != nil {
		t.Fatalf("a claim going already: %v", err)
	}
	for _, r := range fx.requests() {
		if r.GetVerb() == "delete" {
			t.Errorf("a claim going already was sent %v; want no delete", r)
		}
	}
	// Without a premise that confirmed the claim, the decision's resourceVersion is the one sent.
	fx = newFixture(claim("uid-pvc", "uid-fleet"))
	b := a
	b.Premise = nil
	if err := fx.ap.Do(context.Background(), &Target{Current: claim("uid-pvc", "uid-fleet"), CurrentKey: a.Key}, b); err != nil {
		t.Fatal(err)
	}
	if d := only(t, fx.requests()).(k8stesting.DeleteActionImpl); *d.DeleteOptions.Preconditions.ResourceVersion != "9" {
		t.Errorf("resourceVersion %s sent without a confirming read; want the decision's 9", *d.DeleteOptions.Preconditions.ResourceVersion)
	}
}

// A claim someone writes between the fresh read and the delete (the delete meets a Conflict on
// its resourceVersion) is read and confirmed again, and deleted at the version that read found,
// within the same action; when the second read finds it relabelled, nothing more is deleted.
func TestDeleteDiskConfirmedAgainAfterAConflict(t *testing.T) {
	for _, tc := range []struct {
		name     string
		relabel  bool
		deletes  []string // the resourceVersion preconditions sent
		refused  bool
		deletedC bool
	}{
		{"touched by a controller", false, []string{"17", "18"}, false, true},
		{"relabelled to another fleet", true, []string{"17"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-alpha-0", Namespace: "team", UID: "uid-pvc", ResourceVersion: "17",
				Labels: map[string]string{kinds.LabelFleetUID: "uid-fleet"}}}
			fx := newFixture(pvc)
			var sent []string
			fx.kube.PrependReactor("delete", "persistentvolumeclaims", func(action k8stesting.Action) (bool, runtime.Object, error) {
				d := action.(k8stesting.DeleteActionImpl)
				sent = append(sent, *d.DeleteOptions.Preconditions.ResourceVersion)
				if len(sent) > 1 {
					return false, nil, nil
				}
				// Another writer got there first: the claim moves on to version 18.
				touched := pvc.DeepCopy()
				touched.ResourceVersion = "18"
				if tc.relabel {
					touched.Labels[kinds.LabelFleetUID] = "uid-other"
				}
				if err := fx.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), touched, "team"); err != nil {
					t.Fatal(err)
				}
				return true, nil, apierrors.NewConflict(corev1.Resource("persistentvolumeclaims"), d.Name, errors.New("the object has been modified"))
			})
			a := machine.Action{Kind: machine.DeleteDisk, Key: "disk/team/data-alpha-0/uid-pvc", Ref: kinds.Ref{Namespace: "team", Name: "data-alpha-0"},
				UID: "uid-pvc", ResourceVersion: "9", Premise: &machine.Premise{NoMembers: true, DiskOf: "uid-fleet", DiskUID: "uid-pvc"}}
			err := fx.ap.Do(context.Background(), &Target{}, a)
			if tc.refused != errors.Is(err, machine.ErrPremiseChanged) || (!tc.refused && err != nil) {
				t.Fatalf("err %v; want the premise refused: %v", err, tc.refused)
			}
			if strings.Join(sent, ",") != strings.Join(tc.deletes, ",") {
				t.Errorf("deletes sent at resourceVersions %v; want %v", sent, tc.deletes)
			}
			_, gerr := fx.kube.CoreV1().PersistentVolumeClaims("team").Get(context.Background(), "data-alpha-0", metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) != tc.deletedC {
				t.Errorf("claim deleted: %v; want %v", apierrors.IsNotFound(gerr), tc.deletedC)
			}
		})
	}
}

func TestPublishStatus(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	st := v1alpha1.CelldFleetStatus{State: v1alpha1.StateSteady, ObservedGeneration: 1}
	a := machine.Action{Kind: machine.PublishStatus, Key: "status/team/alpha", Status: &st}

	fx := newFixture(f.DeepCopy())
	if err := fx.ap.Do(context.Background(), &Target{Fleet: f}, a); err != nil {
		t.Fatal(err)
	}
	u, ok := only(t, fx.requests()).(k8stesting.PatchActionImpl)
	if !ok || u.GetSubresource() != "status" || u.GetResource().Resource != "celldfleets" || u.GetPatchType() != types.JSONPatchType {
		t.Fatalf("want a JSON patch of celldfleets/status, got %#v", fx.requests()[0])
	}
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(u.GetPatch(), &ops); err != nil || len(ops) != 2 ||
		ops[0].Op != "test" || ops[0].Path != "/metadata/uid" || string(ops[0].Value) != `"`+string(f.UID)+`"` ||
		ops[1].Op != "add" || ops[1].Path != "/status" || !strings.Contains(string(ops[1].Value), `"state":"Steady"`) {
		t.Errorf("want a UID test, then the whole status: %s", u.GetPatch())
	}
	if f.Status.State != "" {
		t.Errorf("the cached fleet was modified")
	}

	fx = newFixture(f.DeepCopy())
	fx.celld.PrependReactor("patch", "celldfleets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "celld.io", Resource: "celldfleets"}, f.Name, nil)
	})
	if err := fx.ap.Do(context.Background(), &Target{Fleet: f}, a); !apierrors.IsConflict(err) {
		t.Errorf("a conflict must come back to requeue, got %v", err)
	}
	if err := newFixture().ap.Do(context.Background(), &Target{Fleet: f}, a); err != nil {
		t.Errorf("a fleet already gone is done: %v", err)
	}
}

func TestRecordEvent(t *testing.T) {
	fx := newFixture()
	a := machine.Action{Kind: machine.RecordEvent, EventType: corev1.EventTypeWarning, Reason: "Healing", Message: "replacing member alpha-1"}
	if err := fx.ap.Do(context.Background(), &Target{Fleet: testFleet(v1alpha1.ProfileBucket)}, a); err != nil {
		t.Fatal(err)
	}
	if got := <-fx.rec.Events; got != "Warning Healing replacing member alpha-1" {
		t.Errorf("event %q", got)
	}
}

// A hand edit that apply cannot take back (a Service port renumbered by hand, which apply would
// keep beside the operator's port of the same name) is replaced whole, then applied again; a
// workload the API server refuses is not retried: the refusal is the spec's, and is reported.
func TestApplyReplacesWhatApplyCannotTakeBack(t *testing.T) {
	f := testFleet(v1alpha1.ProfilePersistentFleet)
	objs := render.Render(f, 3, -1)
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "alpha", field.ErrorList{
		field.Duplicate(field.NewPath("spec", "ports").Index(1).Child("name"), "client")})
	for _, c := range []struct {
		obj  any
		want string
	}{
		{render.OfType[*corev1.Service](objs)[0], "apply json-patch apply"},
		{objs.StatefulSet, "apply"},
	} {
		fx := newFixture()
		applies := 0
		for _, res := range []string{"services", "statefulsets"} {
			fx.kube.PrependReactor("patch", res, func(action k8stesting.Action) (bool, runtime.Object, error) {
				if action.(k8stesting.PatchAction).GetPatchType() == types.ApplyPatchType {
					applies++
					if applies == 1 {
						return true, nil, invalid
					}
				}
				return true, nil, nil
			})
		}
		m := c.obj.(metav1.Object)
		err := fx.ap.Do(context.Background(), &Target{Fleet: f}, machine.Action{Kind: machine.Apply, Key: "apply/" + m.GetName(), Ref: kinds.Ref{Namespace: f.Namespace}, Object: c.obj})
		var got []string
		for _, r := range writesOf(fx.requests()) {
			p := r.(k8stesting.PatchAction)
			switch p.GetPatchType() {
			case types.ApplyPatchType:
				got = append(got, "apply")
			case types.JSONPatchType:
				got = append(got, "json-patch")
				if !strings.Contains(string(p.GetPatch()), `"path":"/spec/ports"`) {
					t.Errorf("%T: the replacing patch does not set the ports whole: %s", c.obj, p.GetPatch())
				}
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%T: requests %v, want %s", c.obj, got, c.want)
		}
		if wantErr := c.want == "apply"; (err != nil) != wantErr || (wantErr && !apierrors.IsInvalid(err)) {
			t.Errorf("%T: error %v; want the refusal only for the workload", c.obj, err)
		}
	}
}

// An object the fleet would write that someone else has, under its name, is read first and never
// written: not a person's object that the caches have not seen yet, nor a same-named fleet's of
// an earlier UID, nor one that names the fleet as an owner but not as its controller.
func TestApplyNeverWritesSomeoneElsesObject(t *testing.T) {
	f := testFleet(v1alpha1.ProfilePersistentFleet)
	old := f.DeepCopy()
	old.UID = "uid-earlier"
	objs := render.Render(f, 3, -1)
	notController := render.OfType[*corev1.Service](objs)[1].DeepCopy()
	notController.OwnerReferences[0].Controller = nil
	for _, c := range []struct {
		name     string
		existing runtime.Object
		obj      any
	}{
		{"a person's service", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team"}}, render.OfType[*corev1.Service](objs)[0]},
		{"an earlier fleet's policy", render.OfType[*networkingv1.NetworkPolicy](render.Render(old, 3, -1))[0], render.OfType[*networkingv1.NetworkPolicy](objs)[0]},
		{"an owner that is not the controller", notController, render.OfType[*corev1.Service](objs)[1]},
		{"a person's statefulset", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team"}}, objs.StatefulSet},
	} {
		fx := newFixture(c.existing)
		m := c.obj.(metav1.Object)
		err := fx.ap.Do(context.Background(), &Target{Fleet: f}, machine.Action{Kind: machine.Apply, Key: "apply/" + m.GetName(), Ref: kinds.Ref{Namespace: f.Namespace, Name: m.GetName()}, Object: c.obj})
		if !errors.Is(err, machine.ErrPremiseChanged) || !strings.Contains(err.Error(), "not controlled by fleet") {
			t.Errorf("%s: error %v; want a refusal that says whose it is not", c.name, err)
		}
		if w := writesOf(fx.requests()); len(w) != 0 {
			t.Errorf("%s: wrote %v", c.name, w)
		}
	}
	// The fleet's own object is written.
	fx := newFixture(render.OfType[*corev1.Service](objs)[0].DeepCopy())
	if err := fx.ap.Do(context.Background(), &Target{Fleet: f}, machine.Action{Kind: machine.Apply, Key: "apply/alpha", Ref: kinds.Ref{Namespace: f.Namespace, Name: "alpha"}, Object: render.OfType[*corev1.Service](objs)[0]}); err != nil {
		t.Errorf("the fleet's own service: %v", err)
	}
}

// uidServer makes the fake API server hold a Service patch to the UID it carries, as the real one
// does: an apply's metadata.uid of another object is Invalid on that field, of no object a
// Conflict; a JSON patch whose test of /metadata/uid fails is a bare Invalid. Once the owner
// check has read the Service, swap replaces it in the store (nil: nothing happens between).
func uidServer(fx *fixture, swap func()) {
	services := corev1.SchemeGroupVersion.WithResource("services")
	reads := 0
	fx.kube.PrependReactor("get", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := fx.kube.Tracker().Get(services, a.GetNamespace(), a.(k8stesting.GetAction).GetName())
		if reads++; reads == 1 && swap != nil {
			swap()
		}
		return true, obj, err
	})
	fx.kube.PrependReactor("patch", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		var uid string
		switch p.GetPatchType() {
		case types.ApplyPatchType:
			var body struct {
				Metadata struct{ UID string } `json:"metadata"`
			}
			_ = json.Unmarshal(p.GetPatch(), &body)
			uid = body.Metadata.UID
		case types.JSONPatchType:
			var ops []struct{ Op, Path, Value string }
			_ = json.Unmarshal(p.GetPatch(), &ops)
			for _, op := range ops {
				if op.Op == "test" && op.Path == "/metadata/uid" {
					uid = op.Value
				}
			}
		}
		if uid == "" {
			return false, nil, nil
		}
		cur, err := fx.kube.Tracker().Get(services, p.GetNamespace(), p.GetName())
		switch {
		case apierrors.IsNotFound(err) && p.GetPatchType() == types.ApplyPatchType:
			return true, nil, apierrors.NewConflict(services.GroupResource(), p.GetName(), errors.New("uid mismatch"))
		case err != nil:
			return true, nil, err
		case string(cur.(metav1.Object).GetUID()) == uid:
			return false, nil, nil
		case p.GetPatchType() == types.JSONPatchType:
			return true, nil, apierrors.NewGenericServerResponse(422, "patch", services.GroupResource(), p.GetName(), "", 0, false)
		}
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, p.GetName(),
			field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable")})
	})
}

// TestApplyHoldsToTheObjectItsOwnerCheckRead: the owner check's read and the apply are two
// requests, and the apply carries the UID the check read. A Service deleted and created again
// by someone else between the two is not written, neither by the apply nor by the replacing
// patch that follows a refusal: the error is a changed premise, retried by the next sync that
// observes the new Service, not the spec's refusal. One deleted and not created again is not
// created in its place: a Conflict, retried as any.
func TestApplyHoldsToTheObjectItsOwnerCheckRead(t *testing.T) {
	f := testFleet(v1alpha1.ProfilePersistentFleet)
	svc := render.OfType[*corev1.Service](render.Render(f, 3, -1))[0]
	services := corev1.SchemeGroupVersion.WithResource("services")
	stored := func() *corev1.Service {
		s := svc.DeepCopy()
		s.UID = "uid-svc-1"
		return s
	}
	apply := machine.Action{Kind: machine.Apply, Key: "apply/" + svc.Name, Ref: kinds.Ref{Kind: "Service", Namespace: f.Namespace, Name: svc.Name}, Object: svc}
	applied := func(fx *fixture) []map[string]any {
		var out []map[string]any
		for _, r := range writesOf(fx.requests()) {
			if p, ok := r.(k8stesting.PatchAction); ok && p.GetPatchType() == types.ApplyPatchType {
				var body map[string]any
				_ = json.Unmarshal(p.GetPatch(), &body)
				out = append(out, body)
			}
		}
		return out
	}

	// The fleet's own Service: the apply carries its UID. None: the apply carries none.
	fx := newFixture(stored())
	uidServer(fx, nil)
	if err := fx.ap.Do(context.Background(), &Target{Fleet: f}, apply); err != nil {
		t.Fatalf("the fleet's own Service: %v", err)
	}
	if b := applied(fx); len(b) != 1 || b[0]["metadata"].(map[string]any)["uid"] != "uid-svc-1" {
		t.Errorf("the fleet's own Service: applied %v, want one apply carrying uid-svc-1", b)
	}
	fx = newFixture()
	if err := fx.ap.Do(context.Background(), &Target{Fleet: f}, apply); err != nil {
		t.Fatalf("no Service: %v", err)
	}
	if b := applied(fx); len(b) != 1 || b[0]["metadata"].(map[string]any)["uid"] != nil {
		t.Errorf("no Service: applied %v, want one apply carrying no uid", b)
	}

	// Replaced between the check and the apply.
	person := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: f.Namespace, UID: "uid-person"}}
	fx = newFixture(stored())
	uidServer(fx, func() {
		_ = fx.kube.Tracker().Delete(services, f.Namespace, svc.Name)
		_ = fx.kube.Tracker().Add(person.DeepCopy())
	})
	err := fx.ap.Do(context.Background(), &Target{Fleet: f}, apply)
	if !errors.Is(err, machine.ErrPremiseChanged) || apierrors.IsInvalid(err) {
		t.Errorf("replaced between the check and the apply: %v; want a changed premise, not the spec's refusal", err)
	}
	for _, r := range writesOf(fx.requests()) {
		if p := r.(k8stesting.PatchAction); p.GetPatchType() != types.ApplyPatchType {
			t.Errorf("replaced between the check and the apply: sent a %s patch %s after the refused apply", p.GetPatchType(), p.GetPatch())
		}
	}

	// Deleted between the check and the apply.
	fx = newFixture(stored())
	uidServer(fx, func() { _ = fx.kube.Tracker().Delete(services, f.Namespace, svc.Name) })
	if err := fx.ap.Do(context.Background(), &Target{Fleet: f}, apply); !apierrors.IsConflict(err) {
		t.Errorf("deleted between the check and the apply: %v; want a Conflict", err)
	}
	if _, err := fx.kube.Tracker().Get(services, f.Namespace, svc.Name); !apierrors.IsNotFound(err) {
		t.Errorf("deleted between the check and the apply: the Service was created again (%v)", err)
	}

	// Refused for a hand edit, then replaced before the patch that replaces the edited spec.
	fx = newFixture(stored())
	uidServer(fx, nil)
	edited := apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, svc.Name, field.ErrorList{
		field.Duplicate(field.NewPath("spec", "ports").Index(1).Child("name"), "client")})
	fx.kube.PrependReactor("patch", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.PatchAction).GetPatchType() == types.ApplyPatchType {
			_ = fx.kube.Tracker().Delete(services, f.Namespace, svc.Name)
			_ = fx.kube.Tracker().Add(person.DeepCopy())
			return true, nil, edited
		}
		return false, nil, nil
	})
	err = fx.ap.Do(context.Background(), &Target{Fleet: f}, apply)
	if !errors.Is(err, machine.ErrPremiseChanged) || apierrors.IsInvalid(err) {
		t.Errorf("replaced before the replacing patch: %v; want a changed premise, not the spec's refusal", err)
	}
	got, _ := fx.kube.Tracker().Get(services, f.Namespace, svc.Name)
	if s := got.(*corev1.Service); s.UID != "uid-person" || len(s.Spec.Ports) != 0 {
		t.Errorf("replaced before the replacing patch: the person's Service was written: %+v", s)
	}
}
