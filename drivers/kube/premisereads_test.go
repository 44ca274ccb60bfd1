package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	appsv1 "k8s.io/api/apps/v1"
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

// premiseServer is an API server that holds the premise's reads by rounds (round names the round
// of a request, "" for one that is not expected) and records every request.
type premiseServer struct {
	f     *v1alpha1.CelldFleet
	d     *appsv1.Deployment
	seen  []string
	mu    sync.Mutex
	ap    *Applier
	pods  []corev1.Pod
	round func(what string) string
	r     *rounds
}

func newPremiseServer(t *testing.T, r *rounds, nodes []string, round func(what string) string) *premiseServer {
	f := testFleet(v1alpha1.ProfileBucket)
	d := render.Render(f, 3, -1).Deployment.DeepCopy()
	d.TypeMeta = metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"}
	d.Generation = 4
	s := &premiseServer{f: f, d: d, r: r, round: round}
	for i, node := range nodes {
		s.pods = append(s.pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("alpha-%d", i), Namespace: f.Namespace, Labels: render.SelectorLabels(f)},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
	}
	fleet := f.DeepCopy()
	fleet.TypeMeta = metav1.TypeMeta{Kind: "CelldFleet", APIVersion: v1alpha1.SchemeGroupVersion.String()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		path := req.URL.Path
		s.mu.Lock()
		s.seen = append(s.seen, req.Method+" "+path)
		s.mu.Unlock()
		var body any
		var what string
		switch {
		case path == "/api/v1/namespaces/team/pods":
			what, body = "LIST pods", &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: s.pods}
		case path == "/apis/celld.io/v1alpha1/namespaces/team/celldfleets/alpha":
			what, body = "GET fleet", fleet
		case path == "/apis/apps/v1/namespaces/team/deployments/"+d.Name:
			what, body = "GET deployment", d
		case strings.HasPrefix(path, "/api/v1/nodes/"):
			name := strings.TrimPrefix(path, "/api/v1/nodes/")
			what, body = "GET node "+name, readyNode(name)
		default:
			http.Error(w, "unexpected "+path, http.StatusBadRequest)
			return
		}
		if rd := round(what); rd != "" {
			r.hold(rd, what)
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
	s.ap = &Applier{Kube: kube, Celld: celld, Recorder: record.NewFakeRecorder(10), nodes: newNodeReads()}
	return s
}

// confirm reads the premise of a scale-in whose decision saw the members on seenOn, and checks
// that it holds on what was read, and that every read of a round went out with the others.
func (s *premiseServer) confirm(t *testing.T, seenOn []string, reads int) {
	t.Helper()
	var names []string
	for _, p := range s.pods {
		names = append(names, p.Name)
	}
	premise := &machine.Premise{Ready: names, Nodes: seenOn, Fleet: s.f.Name, FleetGeneration: s.f.Generation,
		Workload: true, WorkloadExists: true, WorkloadGeneration: 4}
	a := machine.Action{Kind: machine.Apply, Key: "apply/deployment", Ref: kinds.Ref{Namespace: s.f.Namespace, Name: s.d.Name},
		Object: render.Render(s.f, 2, -1).Deployment, Premise: premise}
	target := &Target{Fleet: s.f, Decided: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fresh, err := s.ap.fresh(ctx, target, a)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	seen := append([]string(nil), s.seen...)
	s.mu.Unlock()
	if lone := s.r.sentAlone(); len(lone) > 0 {
		t.Errorf("%q went out while no other read of its round was in flight (the API server got %q): the reads went one after another",
			lone, seen)
	}
	if len(seen) != reads {
		t.Errorf("the API server got %q; want %d reads: the members, the fleet, the workload and each node once", seen, reads)
	}
	for _, p := range s.pods {
		if fresh.MemberNodes[p.Spec.NodeName] == nil {
			t.Errorf("no fresh read of node %s of member %s: %v", p.Spec.NodeName, p.Name, fresh.MemberNodes)
		}
	}
	if len(fresh.Pods) != len(s.pods) || fresh.FleetGeneration != s.f.Generation || !fresh.WorkloadExists || fresh.WorkloadGeneration != 4 {
		t.Errorf("fresh: %d pods, fleet generation %d, workload %t at %d", len(fresh.Pods), fresh.FleetGeneration, fresh.WorkloadExists, fresh.WorkloadGeneration)
	}
	if target.CurrentKey != a.Key || target.Current == nil {
		t.Errorf("the workload's read is not kept for the apply: key %q, %v", target.CurrentKey, target.Current)
	}
	if err := premise.Check(fresh); err != nil {
		t.Errorf("the premise holds on the server's objects: %v", err)
	}
}

// TestPremiseReadsGoAtOnce: a scale-in's premise (every member ready on a ready node, the
// fleet's generation, the workload) is confirmed in two rounds of reads that each go at once when
// the decision named no nodes: the members, the fleet and the workload; then the node of every
// member. Reads sent one after another make a step wait for the sum of their round trips.
func TestPremiseReadsGoAtOnce(t *testing.T) {
	const first, second = "the members, the fleet and the workload", "the members' nodes"
	r := newRounds(time.Second, map[string]int{first: 3, second: 2})
	s := newPremiseServer(t, r, []string{"n1", "n2"}, func(what string) string {
		if strings.HasPrefix(what, "GET node ") {
			return second
		}
		return first
	})
	s.confirm(t, nil, 5)
}

// TestPremiseReadsOfTheNodesSeenGoWithTheList: with the nodes the decision saw the members on,
// they are read beside the members' list, in one round, each once; a member found on a node the
// decision did not see has that node read after the list.
func TestPremiseReadsOfTheNodesSeenGoWithTheList(t *testing.T) {
	const all = "every read"
	r := newRounds(time.Second, map[string]int{all: 5})
	s := newPremiseServer(t, r, []string{"n1", "n2"}, func(string) string { return all })
	s.confirm(t, []string{"n1", "n2"}, 5)

	const first, second = "the members, the fleet, the workload and n1", "n3, found by the list"
	r = newRounds(time.Second, map[string]int{first: 4, second: 1})
	s = newPremiseServer(t, r, []string{"n1", "n3"}, func(what string) string {
		if what == "GET node n3" {
			return second
		}
		return first
	})
	s.confirm(t, []string{"n1"}, 5)
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
