//go:build faults

package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// fakeAPI answers like an API server with one StatefulSet, counts what reaches it, and streams a
// watch event every 10ms until the client goes away.
type fakeAPI struct {
	*httptest.Server
	received atomic.Int64
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	api := &fakeAPI{}
	set := `{"kind":"StatefulSet","apiVersion":"apps/v1","metadata":{"name":"alpha","namespace":"team","resourceVersion":"7"}}`
	api.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.received.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") != "true" {
			fmt.Fprint(w, set)
			return
		}
		flusher := w.(http.Flusher)
		for {
			fmt.Fprintf(w, `{"type":"MODIFIED","object":%s}`+"\n", set)
			flusher.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(api.Close)
	return api
}

// faultyClient is a clientset on the fake API server with faults at rate, of the given kinds
// only (all when none), under the request counters as the operator has them.
func faultyClient(t *testing.T, api *fakeAPI, rate float64, kinds ...FaultKind) (kubernetes.Interface, *Metrics) {
	t.Helper()
	m := NewMetrics()
	cfg := &rest.Config{Host: api.URL, QPS: -1}
	InjectFaults(cfg, Faults{Rate: rate, Seed: 1}, m)
	inner := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		rt = inner(rt)
		ft := rt.(*faultTransport)
		ft.inj.kinds = kinds
		ft.inj.maxDelay = 5 * time.Millisecond
		ft.inj.maxWatchLife = 200 * time.Millisecond
		return ft
	}
	CountRequests(cfg, m)
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, m
}

func counterValue(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestEachFault: every kind fails a request the way client-go and the operator see a real one
// fail, and reaches the API server exactly when the kind says it does.
func TestEachFault(t *testing.T) {
	ctx := context.Background()
	patch := func(c kubernetes.Interface) error {
		_, err := c.AppsV1().StatefulSets("team").Patch(ctx, "alpha", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
		return err
	}
	get := func(c kubernetes.Interface) error {
		_, err := c.AppsV1().StatefulSets("team").Get(ctx, "alpha", metav1.GetOptions{})
		return err
	}
	// A 429 carries a Retry-After, which client-go honours with retries of its own; without them
	// the caller sees the 429.
	getOnce := func(c kubernetes.Interface) error {
		return c.AppsV1().RESTClient().Get().AbsPath("/apis/apps/v1/namespaces/team/statefulsets/alpha").MaxRetries(0).Do(ctx).Error()
	}
	for _, tc := range []struct {
		kind FaultKind
		do   func(kubernetes.Interface) error
		is   func(error) bool
		sent int64
	}{
		{FaultInternalError, get, apierrors.IsInternalError, 0},
		{FaultInternalError, patch, apierrors.IsInternalError, 0},
		{FaultConflict, patch, apierrors.IsConflict, 0},
		{FaultTooManyRequests, getOnce, apierrors.IsTooManyRequests, 0},
		{FaultTimeout, get, utilnet.IsTimeout, 0},
		{FaultTimeout, patch, utilnet.IsTimeout, 0},
		// The nasty one: the write was applied, and the caller is told it timed out.
		{FaultResponseLost, patch, utilnet.IsTimeout, 1},
		{FaultResponseLost, get, utilnet.IsTimeout, 1},
	} {
		api := newFakeAPI(t)
		c, m := faultyClient(t, api, 1, tc.kind)
		err := tc.do(c)
		if err == nil || !tc.is(err) {
			t.Errorf("%s: got error %v", tc.kind, err)
		}
		if got := api.received.Load(); got != tc.sent {
			t.Errorf("%s: %d requests reached the API server, want %d", tc.kind, got, tc.sent)
		}
		if n := counterValue(t, m.faults.WithLabelValues(string(tc.kind))); n != 1 {
			t.Errorf("%s: faults_injected_total{kind=%q} = %v, want 1", tc.kind, tc.kind, n)
		}
	}

	// A conflict is a write's fault: reads pass.
	api := newFakeAPI(t)
	c, m := faultyClient(t, api, 1, FaultConflict)
	if err := get(c); err != nil || api.received.Load() != 1 {
		t.Errorf("a read under conflicts only: error %v, %d requests sent, want none and 1", err, api.received.Load())
	}
	if n := counterValue(t, m.requests.WithLabelValues("get", "statefulsets", "200")); n != 1 {
		t.Errorf("api_requests_total{get,statefulsets} = %v, want 1", n)
	}

	// client-go retries a 429 after its Retry-After: a throttled request still succeeds when the
	// fault does not repeat, and every attempt is counted.
	api = newFakeAPI(t)
	c, m = faultyClient(t, api, 0.5, FaultTooManyRequests)
	for range 4 {
		if err := get(c); err != nil {
			t.Fatalf("a get retried after 429s: %v", err)
		}
	}
	throttled := counterValue(t, m.faults.WithLabelValues(string(FaultTooManyRequests)))
	ok, refused := counterValue(t, m.requests.WithLabelValues("get", "statefulsets", "200")), counterValue(t, m.requests.WithLabelValues("get", "statefulsets", "429"))
	if ok != 4 || refused != throttled || throttled == 0 {
		t.Errorf("4 gets with %v throttled: %v answered 200 and %v answered 429, want 4 and %v", throttled, ok, refused, throttled)
	}
}

// TestWatchDropped: a dropped watch ends early, with the stream broken, while the API server
// would have gone on.
func TestWatchDropped(t *testing.T) {
	api := newFakeAPI(t)
	c, m := faultyClient(t, api, 1, FaultWatchDropped)
	start := time.Now()
	w, err := c.AppsV1().StatefulSets("team").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	events := 0
	timeout := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-w.ResultChan():
			if open {
				events++
			}
		case <-timeout:
			t.Fatalf("the watch was not dropped within 10s (%d events)", events)
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("watch dropped after %s, want within its life of at most 200ms", took)
	}
	if counterValue(t, m.faults.WithLabelValues(string(FaultWatchDropped))) != 1 || counterValue(t, m.requests.WithLabelValues("watch", "statefulsets", "200")) != 1 {
		t.Errorf("want one watch counted, and dropped")
	}
	t.Logf("watch dropped after %d events", events)
}

// TestFaultShare: the share of requests failed is the rate; a seed gives the same decisions again,
// another seed others; concurrent requests are safe (run with -race).
func TestFaultShare(t *testing.T) {
	decisions := func(seed uint64, n int) []FaultKind {
		inj := newFaultInjector(Faults{Rate: 0.1, Seed: seed}, NewMetrics())
		out := make([]FaultKind, n)
		for i := range out {
			out[i], _ = inj.decide([]string{"get", "list", "watch", "apply", "delete"}[i%5])
		}
		return out
	}
	a, b, other := decisions(42, 5000), decisions(42, 5000), decisions(43, 5000)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("the same seed gave different decisions")
	}
	if fmt.Sprint(a) == fmt.Sprint(other) {
		t.Errorf("seeds 42 and 43 gave the same decisions")
	}
	kinds := map[FaultKind]int{}
	failed := 0
	for i, k := range a {
		if k == "" {
			continue
		}
		failed++
		kinds[k]++
		verb := []string{"get", "list", "watch", "apply", "delete"}[i%5]
		if (k == FaultConflict && !writeVerbs[verb]) || (k == FaultWatchDropped && verb != "watch") ||
			(k == FaultResponseLost && verb == "watch") {
			t.Errorf("request %d (%s) got fault %s", i, verb, k)
		}
	}
	// 5000 draws at 0.1: 500 expected, standard deviation about 21.
	if failed < 420 || failed > 580 {
		t.Errorf("%d of 5000 requests failed at rate 0.1, want about 500", failed)
	}
	for _, k := range FaultKinds {
		if kinds[k] == 0 {
			t.Errorf("no fault of kind %s in 5000 requests", k)
		}
	}
	t.Logf("%d of 5000 failed: %v", failed, kinds)

	// The watches that did not fail at their start break later, after 50s on average at 0.1.
	inj := newFaultInjector(Faults{Rate: 0.1, Seed: 42}, NewMetrics())
	var sum time.Duration
	for range 4000 {
		sum += inj.watchLife()
	}
	if mean := sum / 4000; mean < 45*time.Second || mean > 55*time.Second {
		t.Errorf("mean watch life %s at rate 0.1, want about 50s", mean)
	}

	api := newFakeAPI(t)
	c, m := faultyClient(t, api, 0.1, FaultInternalError, FaultTimeout, FaultResponseLost)
	var wg sync.WaitGroup
	var errs atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if _, err := c.AppsV1().StatefulSets("team").Get(context.Background(), "alpha", metav1.GetOptions{}); err != nil {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	injected := 0.0
	for _, k := range FaultKinds {
		injected += counterValue(t, m.faults.WithLabelValues(string(k)))
	}
	if float64(errs.Load()) != injected || injected == 0 {
		t.Errorf("400 concurrent gets: %d failed, %v faults injected; want as many, and some", errs.Load(), injected)
	}
}

func TestRequestVerbs(t *testing.T) {
	for _, c := range []struct{ method, url, verb string }{
		{"GET", "/api/v1/namespaces/team/pods", "list"},
		{"GET", "/api/v1/namespaces/team/pods?watch=true&resourceVersion=5", "watch"},
		{"GET", "/api/v1/namespaces/team/pods/alpha-0", "get"},
		{"GET", "/apis/apps/v1/statefulsets", "list"},
		{"GET", "/api/v1/namespaces", "list"},
		{"GET", "/api/v1/namespaces/team", "get"},
		{"GET", "/apis/celld.io/v1alpha1/namespaces/team/celldfleets/alpha/status", "get"},
		{"GET", "/apis/metrics.k8s.io/v1beta1", "get"},
		{"GET", "/api", "get"},
		{"PATCH", "/apis/apps/v1/namespaces/team/statefulsets/alpha", "patch"},
		{"DELETE", "/api/v1/namespaces/team/pods/alpha-1", "delete"},
	} {
		req, _ := http.NewRequest(c.method, "https://x"+c.url, nil)
		if v := requestVerb(req); v != c.verb {
			t.Errorf("%s %s: verb %q, want %q", c.method, c.url, v, c.verb)
		}
	}
	gr, name := groupResourceName("/apis/apps/v1/namespaces/team/statefulsets/alpha")
	if gr.Group != "apps" || gr.Resource != "statefulsets" || name != "alpha" {
		t.Errorf("groupResourceName: %v %q", gr, name)
	}
	err := apierrors.NewConflict(gr, name, errors.New("x"))
	if !strings.Contains(err.Error(), "statefulsets.apps \"alpha\"") {
		t.Errorf("conflict message %q names no object", err)
	}
}
