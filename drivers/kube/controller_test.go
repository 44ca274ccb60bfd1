package kube

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/render"
)

// TestFirstSyncRequests checks the plumbing of one sync of a new fleet: which requests the
// machine's actions become, in order. What the actions are is the machine's business.
func TestFirstSyncRequests(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	f.Generation = 1
	kube, celld := kubefake.NewClientset(), celldfake.NewSimpleClientset(f.DeepCopy())
	ctl, err := NewController(Clients{Kube: kube, Celld: celld, Recorder: record.NewFakeRecorder(10)},
		Options{Log: zerolog.Nop(), Metrics: NewMetrics()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.inf.Fleets.GetIndexer().Add(f); err != nil {
		t.Fatal(err)
	}
	if err := ctl.syncAndWrite(context.Background(), key("team", "alpha")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range append(celld.Actions(), kube.Actions()...) {
		got = append(got, describe(a))
	}
	want := []string{
		"create celldreservations",
		"patch celldfleets merge",
		"get celldfleets", // the workload write's premise: the fleet's spec as decided on
		"patch celldfleets/status json",
	}
	// Every object is read before it is written (absent, or the fleet's own), at its kind's
	// resource, in the table's order: the Services, the NetworkPolicies, the PDB, then any other.
	rendered := render.Render(f, f.Spec.Members, -1)
	for _, obj := range rendered.Owned {
		r, _ := kinds.Lookup(kinds.Of(obj))
		want = append(want, "get "+r.Resource.Resource, "patch "+r.Resource.Resource+" apply")
	}
	want = append(want,
		"get deployments", // and the workload as decided on: absent
		"patch deployments apply",
	)
	if !strings.HasPrefix(strings.Join(want[4:], " "), "get services patch services apply get services patch services apply get networkpolicies") {
		t.Fatalf("the table's order changed: %v", want)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var m dto.Metric
	if err := ctl.metrics.actions.WithLabelValues("Apply", "ok").Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n != float64(len(rendered.All())) {
		t.Errorf("actions{Apply,ok} = %v, want one per rendered object, %d", n, len(rendered.All()))
	}

	// The fleet deleted and its finalizer gone: the sync forgets it.
	if err := ctl.inf.Fleets.GetIndexer().Delete(f); err != nil {
		t.Fatal(err)
	}
	if err := ctl.syncAndWrite(context.Background(), key("team", "alpha")); err != nil {
		t.Fatal(err)
	}
	if ctl.loop.Remembered() != 0 {
		t.Errorf("the machine of a gone fleet is kept")
	}
}

func describe(a k8stesting.Action) string {
	s := a.GetVerb() + " " + a.GetResource().Resource
	if a.GetSubresource() != "" {
		s += "/" + a.GetSubresource()
	}
	if p, ok := a.(k8stesting.PatchActionImpl); ok {
		s += " " + map[types.PatchType]string{types.ApplyPatchType: "apply", types.MergePatchType: "merge", types.JSONPatchType: "json"}[p.PatchType]
	}
	return s
}

func TestWriteCounting(t *testing.T) {
	cases := []struct{ method, ctype, path, verb, resource string }{
		{"POST", "", "/api/v1/namespaces/team/events", "create", "events"},
		{"PATCH", "application/apply-patch+yaml", "/apis/apps/v1/namespaces/team/statefulsets/alpha", "apply", "statefulsets"},
		{"PATCH", "application/merge-patch+json", "/apis/celld.io/v1alpha1/namespaces/team/celldfleets/alpha", "patch", "celldfleets"},
		{"PUT", "", "/apis/celld.io/v1alpha1/namespaces/team/celldfleets/alpha/status", "update", "celldfleets/status"},
		{"DELETE", "", "/api/v1/namespaces/team/pods/alpha-1", "delete", "pods"},
		{"PUT", "", "/apis/coordination.k8s.io/v1/namespaces/celld-system/leases/celld-operator", "update", "leases"},
		{"GET", "", "/api/v1/namespaces/team/pods", "", "pods"},
		{"PUT", "", "/api/v1/nodes/node-a/status", "update", "nodes/status"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, "https://x"+c.path, nil)
		req.Header.Set("Content-Type", c.ctype)
		if v := writeVerb(req); v != c.verb {
			t.Errorf("%s %s: verb %q, want %q", c.method, c.path, v, c.verb)
		}
		if r := resourceOf(c.path); r != c.resource {
			t.Errorf("%s: resource %q, want %q", c.path, r, c.resource)
		}
	}
}

func TestUtilization(t *testing.T) {
	now := time.Unix(500, 0)
	pod := func(name, cpu string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"}}
		c := corev1.Container{Name: "celld"}
		if cpu != "" {
			c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		}
		p.Spec.Containers = []corev1.Container{c}
		return p
	}
	sample := func(name, cpu string) metricsv1beta1.PodMetrics {
		return metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "celld", Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
	}
	pods := []*corev1.Pod{pod("a-0", "500m"), pod("a-1", "500m"), pod("a-2", "")}
	u, ok := Utilization(pods, []metricsv1beta1.PodMetrics{sample("a-0", "400m"), sample("a-1", "300m"), sample("a-2", "900m"), sample("x", "1")}, now)
	if !ok || u.Percent != 70 || u.Members != 2 || u.Unavailable || !u.Time.Equal(now) {
		t.Errorf("got %+v ok=%t, want 70%% over the 2 members with requests", u, ok)
	}
	if _, ok := Utilization(pods[2:], []metricsv1beta1.PodMetrics{sample("a-2", "1")}, now); ok {
		t.Errorf("no member with a CPU request gives no figure")
	}
}

// syncAndWrite is one sync, then the status writes it handed over, on the test's goroutine.
func (c *Controller) syncAndWrite(ctx context.Context, key events.FleetKey) error {
	err := c.Sync(ctx, key)
	drainStatuses(ctx, c.statuses)
	return err
}

// The controller counts a heal in heals_total when its delete removed the member, by reason.
func TestControllerCountsHeals(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "alpha-1", Namespace: "team", UID: "uid-pod", ResourceVersion: "42"}}
	m := NewMetrics()
	ctl, err := NewController(Clients{Kube: kubefake.NewClientset(pod), Celld: celldfake.NewSimpleClientset(), Recorder: record.NewFakeRecorder(10)},
		Options{Log: zerolog.Nop(), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	heal := machine.Action{Kind: machine.DeletePod, Key: "heal", Ref: kinds.Ref{Namespace: "team", Name: "alpha-1"}, UID: "uid-pod", ResourceVersion: "42", Reason: "VolumeLost"}
	for range 2 {
		if err := ctl.ap.Do(context.Background(), &Target{}, heal); err != nil {
			t.Fatal(err)
		}
	}
	var got dto.Metric
	if err := m.heals.WithLabelValues("VolumeLost").Write(&got); err != nil {
		t.Fatal(err)
	}
	if n := got.GetCounter().GetValue(); n != 1 {
		t.Errorf("heals_total{reason=VolumeLost} = %g; want 1", n)
	}
}

// A stop asked for before the caches synced is a clean stop, not a failure: SIGTERM right after
// the operator started must exit 0.
func TestRunStoppedBeforeSync(t *testing.T) {
	ctl, err := NewController(Clients{Kube: kubefake.NewClientset(), Celld: celldfake.NewSimpleClientset(), Recorder: record.NewFakeRecorder(10)},
		Options{Log: zerolog.Nop(), Metrics: NewMetrics(), Workers: 1, Resync: time.Hour, CapacityInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// The informers never started, so the caches never sync.
	if err := ctl.Run(ctx); err != nil {
		t.Fatalf("Run stopped before the caches synced: %v, want a clean stop", err)
	}
}
