package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	"github.com/celld/celld-operator/api/v1alpha1"
)

// series lists the samples of one metric family as "label=value,... value", labels in name order.
func series(t *testing.T, m *Metrics, name string) []string {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := s.GetGauge().GetValue() + s.GetCounter().GetValue()
			out = append(out, strings.Join(labels, ",")+" "+strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	sort.Strings(out)
	return out
}

// TestFleetGaugesFollowTheFleet: a synced fleet has its state, member counts and conditions as
// series labelled with its namespace and name, and none once it is deleted, so nothing alerts on
// a fleet that is gone.
func TestFleetGaugesFollowTheFleet(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	f.Generation = 1
	kube, celld := kubefake.NewClientset(), celldfake.NewSimpleClientset(f.DeepCopy())
	m := NewMetrics()
	ctl, err := NewController(Clients{Kube: kube, Celld: celld, Recorder: record.NewFakeRecorder(10)}, Options{Log: zerolog.Nop(), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.inf.Fleets.GetIndexer().Add(f); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Sync(context.Background(), key("team", "alpha")); err != nil {
		t.Fatal(err)
	}
	state := series(t, m, "celld_operator_fleet_state")
	if len(state) != len(allStates) || !contains(state, "fleet=alpha,namespace=team,state=Provisioning 1") {
		t.Errorf("fleet_state: %q, want one series per state, Provisioning at 1", state)
	}
	for _, s := range state {
		if !strings.HasSuffix(s, "state=Provisioning 1") && !strings.HasSuffix(s, " 0") {
			t.Errorf("fleet_state: %q is not 0 though the fleet is in another state", s)
		}
	}
	if got := series(t, m, "celld_operator_fleet_desired_members"); len(got) != 1 || got[0] != "fleet=alpha,namespace=team 3" {
		t.Errorf("fleet_desired_members: %q, want the spec's 3", got)
	}
	if got := series(t, m, "celld_operator_fleet_ready_members"); len(got) != 1 || got[0] != "fleet=alpha,namespace=team 0" {
		t.Errorf("fleet_ready_members: %q, want 0 (no member runs yet)", got)
	}
	if got := series(t, m, "celld_operator_fleet_current_members"); len(got) != 1 {
		t.Errorf("fleet_current_members: %q, want one series", got)
	}
	conds := series(t, m, "celld_operator_fleet_condition")
	for _, want := range []string{
		"fleet=alpha,namespace=team,reason=MembersNotReady,status=False,type=Ready 1",
		"fleet=alpha,namespace=team,reason=Healthy,status=False,type=Degraded 1",
	} {
		if !contains(conds, want) {
			t.Errorf("fleet_condition: %q, want %q among them", conds, want)
		}
	}
	if got := series(t, m, "celld_operator_syncs_total"); len(got) != 1 || got[0] != "result=ok 1" {
		t.Errorf("syncs_total: %q, want one ok sync", got)
	}

	if err := ctl.inf.Fleets.GetIndexer().Delete(f); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Sync(context.Background(), key("team", "alpha")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"celld_operator_fleet_state", "celld_operator_fleet_desired_members", "celld_operator_fleet_current_members",
		"celld_operator_fleet_ready_members", "celld_operator_fleet_condition"} {
		if got := series(t, m, name); len(got) != 0 {
			t.Errorf("%s of a deleted fleet: %q, want none", name, got)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestBuildInfoAndLeader: build_info carries the stamped version and commit and the Go version;
// the leader gauge is 1 for a controller without leader election and 0 for one standing by.
func TestBuildInfoAndLeader(t *testing.T) {
	m := NewMetrics()
	if got := series(t, m, "celld_operator_build_info"); len(got) != 1 || !strings.HasSuffix(got[0], " 1") {
		t.Errorf("build_info before SetBuild: %q, want one series at 1 (operator down alerts on its absence)", got)
	}
	m.SetBuild("v1.2.3", "abc123")
	want := "commit=abc123,go_version=" + runtime.Version() + ",version=v1.2.3 1"
	if got := series(t, m, "celld_operator_build_info"); len(got) != 1 || got[0] != want {
		t.Errorf("build_info: %q, want %q", got, want)
	}
	if got := series(t, m, "celld_operator_leader"); len(got) != 1 || got[0] != " 0" {
		t.Errorf("leader of metrics no controller uses: %q, want 0", got)
	}
	kube, celld := kubefake.NewClientset(), celldfake.NewSimpleClientset()
	if _, err := NewController(Clients{Kube: kube, Celld: celld}, Options{Log: zerolog.Nop(), Metrics: m}); err != nil {
		t.Fatal(err)
	}
	if got := series(t, m, "celld_operator_leader"); len(got) != 1 || got[0] != " 1" {
		t.Errorf("leader without leader election: %q, want 1", got)
	}
	standby := NewMetrics()
	lead := NewLeadership(LeaderElection{Namespace: "celld-system", Name: "celld-operator"})
	if _, err := NewController(Clients{Kube: kube, Celld: celld}, Options{Log: zerolog.Nop(), Metrics: standby, Leadership: lead}); err != nil {
		t.Fatal(err)
	}
	if got := series(t, standby, "celld_operator_leader"); len(got) != 1 || got[0] != " 0" {
		t.Errorf("leader of a replica that never acquired the lease: %q, want 0", got)
	}
}

// TestRequestsCountedByCode: the request counter labels each request with the response's code.
func TestRequestsCountedByCode(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/missing") {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
			return
		}
		_, _ = w.Write([]byte(`{"kind":"StatefulSet","apiVersion":"apps/v1","metadata":{"name":"alpha","namespace":"team"}}`))
	}))
	defer api.Close()
	m := NewMetrics()
	cfg := &rest.Config{Host: api.URL, QPS: -1}
	CountRequests(cfg, m)
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.AppsV1().StatefulSets("team").Get(context.Background(), "alpha", metav1.GetOptions{})
	_, _ = c.AppsV1().StatefulSets("team").Get(context.Background(), "missing", metav1.GetOptions{})
	got := series(t, m, "celld_operator_api_requests_total")
	want := []string{"code=200,resource=statefulsets,verb=get 1", "code=404,resource=statefulsets,verb=get 1"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("api_requests_total:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
