package kube

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// TestLeaseTakenMidSyncCancelsTheSync: a sync blocked mid-flight on a context from Bound ends as
// soon as another identity holds the Lease, long before the elector's renew deadline, the gate
// stays closed, and RunLeader reports the loss.
func TestLeaseTakenMidSyncCancelsTheSync(t *testing.T) {
	kube := kubefake.NewClientset()
	// The fake does not check resourceVersions: refuse the old holder's optimistic renewal over the
	// intruder's record, as the API server does.
	kube.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		l := a.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		stored, err := kube.Tracker().Get(a.GetResource(), l.Namespace, l.Name)
		if err == nil && ptr.Deref(stored.(*coordinationv1.Lease).Spec.HolderIdentity, "") == "intruder" && ptr.Deref(l.Spec.HolderIdentity, "") != "intruder" {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), l.Name, errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	le := LeaderElection{Namespace: "celld-system", Name: "celld-operator", Identity: "replica-a",
		LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second, RetryPeriod: 100 * time.Millisecond}
	le.Leadership = NewLeadership(le)
	inSync := make(chan struct{})
	syncEnded := make(chan error, 1)
	work := func(wctx context.Context) error {
		// What processNext does: a sync detached from shutdown, bound to the lease.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(wctx), time.Minute)
		defer cancel()
		sctx, unbind := le.Leadership.Bound(sctx)
		defer unbind()
		close(inSync)
		<-sctx.Done()
		syncEnded <- context.Cause(sctx)
		<-wctx.Done()
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- RunLeader(context.Background(), kube, le, zerolog.Nop(), work) }()
	select {
	case <-inSync:
	case <-time.After(10 * time.Second):
		t.Fatal("never became the leader")
	}
	if !le.Leadership.Leading() {
		t.Fatal("the leader's gate is closed while it holds the lease")
	}
	lease, err := kube.CoordinationV1().Leases(le.Namespace).Get(context.Background(), le.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease.Spec.HolderIdentity = ptr.To("intruder")
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
	taken := time.Now()
	if _, err := kube.CoordinationV1().Leases(le.Namespace).Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-syncEnded:
		if !errors.Is(cause, ErrLeadershipLost) {
			t.Errorf("sync ended by %v, want ErrLeadershipLost", cause)
		}
		if d := time.Since(taken); d > 2*time.Second {
			t.Errorf("the sync ended %s after the lease was taken; want within a few retry periods", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the sync in flight still runs 10s after another identity took the lease")
	}
	if le.Leadership.Leading() {
		t.Error("the gate is open after the lease was taken")
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrLeadershipLost) {
			t.Errorf("RunLeader: %v, want ErrLeadershipLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunLeader did not return after the lease was taken")
	}
}

// TestLeadershipClosesAtTheRenewDeadline: a leader whose last accepted renewal is a renew deadline
// old stops writing on its own, whatever the elector still believes.
func TestLeadershipClosesAtTheRenewDeadline(t *testing.T) {
	le := LeaderElection{Namespace: "celld-system", Name: "celld-operator", RenewDeadline: 10 * time.Second}
	l := NewLeadership(le)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	if l.Leading() {
		t.Fatal("leading before acquiring the lease")
	}
	l.renewedAt(now)
	l.start(nil)
	now = now.Add(le.RenewDeadline - time.Millisecond)
	if !l.Leading() {
		t.Fatal("not leading within the renew deadline")
	}
	now = now.Add(time.Millisecond)
	if l.Leading() {
		t.Fatal("leading a renew deadline after the last renewal")
	}
	select {
	case <-l.Lost():
	default:
		t.Fatal("Lost not closed")
	}
	l.renewedAt(now.Add(time.Second))
	l.start(nil)
	if l.Leading() {
		t.Error("leadership came back after it was lost")
	}
}

// TestGuardWritesSendsNoWriteWithoutTheLease: what reaches the API server from clients built on a
// guarded config, standing by, leading, and after the loss.
func TestGuardWritesSendsNoWriteWithoutTheLease(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/v1/namespaces/ns/configmaps":
			_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","namespace":"ns"}}`))
		default:
			_, _ = w.Write([]byte(`{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"celld-operator","namespace":"celld-system"}}`))
		}
	}))
	defer srv.Close()
	sent := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}

	le := LeaderElection{Namespace: "celld-system", Name: "celld-operator", RenewDeadline: time.Hour}
	lead := NewLeadership(le)
	m := NewMetrics()
	cfg := &rest.Config{Host: srv.URL}
	GuardWrites(cfg, lead, m)
	CountRequests(cfg, m)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "celld-operator"}}
	write := func() error {
		_, err := kube.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{})
		return err
	}

	// Standing by: reads and the Lease's own requests go; a write does not.
	if err := write(); !errors.Is(err, ErrNotLeading) {
		t.Errorf("write standing by: %v, want ErrNotLeading", err)
	}
	if _, err := kube.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("read standing by: %v", err)
	}
	if _, err := kube.CoordinationV1().Leases("celld-system").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Errorf("create the lease standing by: %v", err)
	}
	if _, err := kube.CoordinationV1().Leases("celld-system").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Errorf("renew the lease standing by: %v", err)
	}
	if _, err := kube.CoordinationV1().Leases("other").Update(ctx, lease, metav1.UpdateOptions{}); !errors.Is(err, ErrNotLeading) {
		t.Errorf("update another namespace's lease standing by: %v, want ErrNotLeading", err)
	}
	want := []string{"GET /api/v1/namespaces/ns/configmaps", "POST /apis/coordination.k8s.io/v1/namespaces/celld-system/leases",
		"PUT /apis/coordination.k8s.io/v1/namespaces/celld-system/leases/celld-operator"}
	if s := sent(); !equal(s, want) {
		t.Errorf("sent standing by: %q, want %q", s, want)
	}

	lead.renewedAt(time.Now())
	lead.start(nil)
	if err := write(); err != nil {
		t.Errorf("write while leading: %v", err)
	}
	if s := sent(); !equal(s, []string{"POST /api/v1/namespaces/ns/configmaps"}) {
		t.Errorf("sent while leading: %q", s)
	}

	lead.lose()
	if err := write(); !errors.Is(err, ErrNotLeading) {
		t.Errorf("write after the loss: %v, want ErrNotLeading", err)
	}
	if s := sent(); len(s) != 0 {
		t.Errorf("sent after the loss: %q, want nothing", s)
	}
	if n := counterSum(t, m, "celld_operator_api_writes_refused_total"); n != 3 {
		t.Errorf("api_writes_refused_total %g, want 3", n)
	}
	if n := counterSum(t, m, "celld_operator_api_writes_total"); n != 3 {
		t.Errorf("api_writes_total %g, want 3 (the lease's two and the leader's one)", n)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func counterSum(t *testing.T, m *Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, s := range mf.GetMetric() {
				total += s.GetCounter().GetValue()
			}
		}
	}
	return total
}

// slowLock is a Lease lock whose writes take latency of the test's clock to be answered, and
// answer err.
type slowLock struct {
	resourcelock.Interface
	clock   *time.Time
	latency time.Duration
	err     error
}

func (s *slowLock) Identity() string { return "replica-a" }

func (s *slowLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	*s.clock = s.clock.Add(s.latency)
	return s.err
}

func (s *slowLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	*s.clock = s.clock.Add(s.latency)
	return s.err
}

// TestRenewalCountsFromWhenItWasSent: a renewal extends the leader's writes from when it was
// sent, not answered: a standby counts the lease duration from the renewTime the write carried,
// so a deadline counted from the answer would keep writing for as long as the API server took
// to answer, past the margin the flags leave. Only a write the API server accepted, naming this
// replica as the holder, counts: a failed renewal, or the release (no holder), renews nothing.
func TestRenewalCountsFromWhenItWasSent(t *testing.T) {
	const deadline, latency = 10 * time.Second, 3 * time.Second
	for _, c := range []struct {
		name   string
		write  func(*renewalClock) error
		holder string
		err    error
		counts bool
	}{
		{"a renewal", func(r *renewalClock) error {
			return r.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "replica-a"})
		}, "replica-a", nil, true},
		{"the acquisition", func(r *renewalClock) error {
			return r.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "replica-a"})
		}, "replica-a", nil, true},
		{"a refused renewal", func(r *renewalClock) error {
			return r.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "replica-a"})
		}, "replica-a", errors.New("etcdserver: request timed out"), false},
		{"a refused acquisition", func(r *renewalClock) error {
			return r.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "replica-a"})
		}, "replica-a", errors.New("already exists"), false},
		{"the release", func(r *renewalClock) error {
			return r.Update(context.Background(), resourcelock.LeaderElectionRecord{})
		}, "", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := NewLeadership(LeaderElection{Namespace: "celld-system", Name: "celld-operator", RenewDeadline: deadline})
			start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
			now := start
			l.now = func() time.Time { return now }
			l.renewedAt(start)
			l.start(nil)
			now = now.Add(5 * time.Second)
			sent := now
			r := &renewalClock{Interface: &slowLock{clock: &now, latency: latency, err: c.err}, l: l}
			if err := c.write(r); !errors.Is(err, c.err) {
				t.Fatalf("the write answered %v, want %v", err, c.err)
			}
			from := start
			if c.counts {
				from = sent
			}
			now = from.Add(deadline - time.Millisecond)
			if !l.Leading() {
				t.Fatalf("not leading %s after the renewal it counts from", deadline-time.Millisecond)
			}
			now = from.Add(deadline)
			if l.Leading() {
				t.Fatalf("still leading a renew deadline after the renewal it should count from (%s after it was sent, answered %s later)",
					now.Sub(sent), latency)
			}
		})
	}
}
