package kube

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/render"
)

// rounds holds each request until every other request of its round is in flight too, or until
// alone passed: then it counts the request as sent alone.
type rounds struct {
	alone time.Duration
	mu    sync.Mutex
	size  map[string]int
	in    map[string]int
	all   map[string]chan struct{}
	lone  []string
}

func newRounds(alone time.Duration, size map[string]int) *rounds {
	r := &rounds{alone: alone, size: size, in: map[string]int{}, all: map[string]chan struct{}{}}
	for round := range size {
		r.all[round] = make(chan struct{})
	}
	return r
}

func (r *rounds) hold(round, req string) {
	r.mu.Lock()
	r.in[round]++
	if r.in[round] == r.size[round] {
		close(r.all[round])
	}
	all := r.all[round]
	r.mu.Unlock()
	select {
	case <-all:
	case <-time.After(r.alone):
		r.mu.Lock()
		r.lone = append(r.lone, req)
		r.mu.Unlock()
	}
}

func (r *rounds) sentAlone() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lone...)
}

// TestPremiseReadsGoAtOnce: a scale-in's premise (every member ready on a ready node, the
// fleet's generation, the workload) is confirmed in two rounds of reads that each go at once: the
// members, the fleet and the workload; then the node of every member. Reads sent one after
// another make a step wait for the sum of their round trips.
func TestPremiseReadsGoAtOnce(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	d := render.Render(f, 3, -1).Deployment.DeepCopy()
	d.TypeMeta = metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"}
	d.Generation = 4
	member := func(name, node string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace, Labels: render.SelectorLabels(f)},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	pods := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
		Items: []corev1.Pod{member("alpha-0", "n1"), member("alpha-1", "n2")}}
	fleet := f.DeepCopy()
	fleet.TypeMeta = metav1.TypeMeta{Kind: "CelldFleet", APIVersion: v1alpha1.SchemeGroupVersion.String()}

	const first, second = "the members, the fleet and the workload", "the members' nodes"
	r := newRounds(time.Second, map[string]int{first: 3, second: 2})
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		path := req.URL.Path
		mu.Lock()
		seen = append(seen, req.Method+" "+path)
		mu.Unlock()
		var body any
		switch {
		case path == "/api/v1/namespaces/team/pods":
			r.hold(first, "LIST pods")
			body = pods
		case path == "/apis/celld.io/v1alpha1/namespaces/team/celldfleets/alpha":
			r.hold(first, "GET fleet")
			body = fleet
		case path == "/apis/apps/v1/namespaces/team/deployments/"+d.Name:
			r.hold(first, "GET deployment")
			body = d
		case strings.HasPrefix(path, "/api/v1/nodes/"):
			name := strings.TrimPrefix(path, "/api/v1/nodes/")
			r.hold(second, "GET node "+name)
			body = readyNode(name)
		default:
			http.Error(w, "unexpected "+path, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		writeJSON(w, body)
	}))
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, QPS: -1}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	celld, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ap := &Applier{Kube: kube, Celld: celld, Recorder: record.NewFakeRecorder(10), nodes: newNodeReads()}

	premise := &machine.Premise{Ready: []string{"alpha-0", "alpha-1"}, Fleet: f.Name, FleetGeneration: f.Generation,
		Workload: true, WorkloadExists: true, WorkloadGeneration: 4}
	a := machine.Action{Kind: machine.Apply, Key: "apply/deployment", Ref: kinds.Ref{Namespace: f.Namespace, Name: d.Name},
		Object: render.Render(f, 2, -1).Deployment, Premise: premise}
	target := &Target{Fleet: f, Decided: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fresh, err := ap.fresh(ctx, target, a)
	if err != nil {
		t.Fatal(err)
	}
	if lone := r.sentAlone(); len(lone) > 0 {
		t.Errorf("%q went out while no other read of its round was in flight (the API server got %q): the reads went one after another",
			lone, seen)
	}
	if len(seen) != 5 {
		t.Errorf("the API server got %q; want 5 reads: the members, the fleet, the workload and two nodes", seen)
	}
	if len(fresh.Pods) != 2 || fresh.MemberNodes["n1"] == nil || fresh.MemberNodes["n2"] == nil ||
		fresh.FleetGeneration != f.Generation || !fresh.WorkloadExists || fresh.WorkloadGeneration != 4 {
		t.Errorf("fresh: %d pods, nodes %v, fleet generation %d, workload %t at %d", len(fresh.Pods), fresh.MemberNodes,
			fresh.FleetGeneration, fresh.WorkloadExists, fresh.WorkloadGeneration)
	}
	if target.CurrentKey != a.Key || target.Current == nil {
		t.Errorf("the workload's read is not kept for the apply: key %q, %v", target.CurrentKey, target.Current)
	}
	if err := premise.Check(fresh); err != nil {
		t.Errorf("the premise holds on the server's objects: %v", err)
	}
}

// TestPremiseReadsFailInAFixedOrder: whichever read answers first, a premise's reads fail with the
// first error in the order of the premise: its node, its claim, the members, their nodes, the
// fleet, the workload.
func TestPremiseReadsFailInAFixedOrder(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	d := render.Render(f, 3, -1).Deployment
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "alpha-0", Namespace: f.Namespace, Labels: render.SelectorLabels(f)},
		Spec: corev1.PodSpec{NodeName: "n2"}}
	a := machine.Action{Kind: machine.Apply, Key: "apply/deployment", Ref: kinds.Ref{Namespace: f.Namespace, Name: d.Name}, Object: d,
		Premise: &machine.Premise{Node: "n1", Claim: "data-alpha-0", Ready: []string{"alpha-0"}, Fleet: f.Name, FleetGeneration: 1, Workload: true}}
	fail := func(verb, resource, name string) k8stesting.ReactionFunc {
		return func(act k8stesting.Action) (bool, runtime.Object, error) {
			if act.GetVerb() != verb || act.GetResource().Resource != resource {
				return false, nil, nil
			}
			if g, ok := act.(k8stesting.GetAction); ok && name != "" && g.GetName() != name {
				return false, nil, nil
			}
			return true, nil, errors.New(resource + " " + name + " broke")
		}
	}
	for _, tc := range []struct {
		broken []k8stesting.ReactionFunc
		want   string
	}{
		{[]k8stesting.ReactionFunc{fail("get", "nodes", "n1"), fail("get", "persistentvolumeclaims", ""), fail("list", "pods", ""), fail("get", "celldfleets", ""), fail("get", "deployments", "")},
			"get node n1: nodes n1 broke"},
		{[]k8stesting.ReactionFunc{fail("get", "persistentvolumeclaims", ""), fail("list", "pods", ""), fail("get", "celldfleets", ""), fail("get", "deployments", "")},
			"get claim data-alpha-0: persistentvolumeclaims  broke"},
		{[]k8stesting.ReactionFunc{fail("list", "pods", ""), fail("get", "celldfleets", ""), fail("get", "deployments", "")},
			"list members: pods  broke"},
		{[]k8stesting.ReactionFunc{fail("get", "nodes", "n2"), fail("get", "celldfleets", ""), fail("get", "deployments", "")},
			"get node n2 of member alpha-0: nodes n2 broke"},
		{[]k8stesting.ReactionFunc{fail("get", "celldfleets", ""), fail("get", "deployments", "")},
			"get fleet alpha: celldfleets  broke"},
		{[]k8stesting.ReactionFunc{fail("get", "deployments", "")},
			"get workload: deployments  broke"},
	} {
		for range 5 {
			kube, celld := kubefake.NewClientset(pod.DeepCopy()), celldfake.NewSimpleClientset(f.DeepCopy())
			for _, r := range tc.broken {
				kube.PrependReactor("*", "*", r)
				celld.PrependReactor("*", "*", r)
			}
			ap := &Applier{Kube: kube, Celld: celld, nodes: newNodeReads()}
			if _, err := ap.fresh(context.Background(), &Target{Fleet: f, Decided: time.Now()}, a); err == nil || err.Error() != tc.want {
				t.Fatalf("got %v; want %q", err, tc.want)
			}
		}
	}
}

// TestControllerSharesNodeReads: the controller's Applier shares its premises' node reads between
// syncs.
func TestControllerSharesNodeReads(t *testing.T) {
	ctl, err := NewController(Clients{Kube: kubefake.NewClientset(), Celld: celldfake.NewSimpleClientset(), Recorder: record.NewFakeRecorder(10)},
		Options{Log: zerolog.Nop(), Metrics: NewMetrics()})
	if err != nil {
		t.Fatal(err)
	}
	if ctl.ap.nodes == nil {
		t.Error("the controller's Applier reads every node on its own")
	}
}
