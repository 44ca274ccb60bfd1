package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// heldNodes is an API server that holds every node GET until the test answers it with a status
// code: 200 (the node, ready), 404 or 500.
type heldNodes struct {
	*httptest.Server
	arrived chan heldGet
	// stop lets every held GET go when the test ends, answered or not.
	stop chan struct{}
	mu   sync.Mutex
	gets int
}

// heldGet is one node GET the server holds: the test answers it on reply.
type heldGet struct {
	name  string
	reply chan int
}

func newHeldNodes(t *testing.T) (*heldNodes, kubernetes.Interface) {
	t.Helper()
	h := &heldNodes{arrived: make(chan heldGet, 10), stop: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/api/v1/nodes/")
		if !ok || r.Method != http.MethodGet {
			http.Error(w, "not a node GET", http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.gets++
		h.mu.Unlock()
		g := heldGet{name: name, reply: make(chan int, 1)}
		h.arrived <- g
		var code int
		select {
		case code = <-g.reply:
		case <-h.stop:
			http.Error(w, "the test ended", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch code {
		case http.StatusOK:
			writeJSON(w, readyNode(name))
		default:
			w.WriteHeader(code)
			reason := metav1.StatusReasonInternalError
			if code == http.StatusNotFound {
				reason = metav1.StatusReasonNotFound
			}
			writeJSON(w, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
				Reason: reason, Code: int32(code), Message: fmt.Sprintf("node %s: %d", name, code)})
		}
	}))
	t.Cleanup(h.Close)
	t.Cleanup(func() { close(h.stop) })
	c, err := kubernetes.NewForConfig(&rest.Config{Host: h.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return h, c
}

// next waits for the next node GET to reach the server.
func (h *heldNodes) next(t *testing.T) heldGet {
	t.Helper()
	select {
	case g := <-h.arrived:
		return g
	case <-time.After(5 * time.Second):
		t.Fatal("no node GET reached the API server")
		return heldGet{}
	}
}

// none confirms that no other node GET reaches the server for a while.
func (h *heldNodes) none(t *testing.T, why string) {
	t.Helper()
	select {
	case g := <-h.arrived:
		t.Fatalf("a second GET of node %s went out: %s", g.name, why)
	case <-time.After(200 * time.Millisecond):
	}
}

func (h *heldNodes) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gets
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	_, _ = w.Write(b)
}

func readyNode(name string) *corev1.Node {
	return &corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

// answer is what one get returned.
type answer struct {
	node *corev1.Node
	err  error
}

// getAsync calls get in a goroutine; its answer arrives on the channel.
func getAsync(ctx context.Context, r *nodeReads, c kubernetes.Interface, name string, decided time.Time) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		n, err := r.get(ctx, c, name, decided)
		out <- answer{n, err}
	}()
	return out
}

func wait(t *testing.T, ch <-chan answer, who string) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(5 * time.Second):
		t.Fatalf("%s never got an answer", who)
		return answer{}
	}
}

// sentAt is when the latest read of the node was sent.
func sentAt(t *testing.T, r *nodeReads, name string) time.Time {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	rd := r.reads[name]
	if rd == nil {
		t.Fatalf("no read of node %s is held", name)
	}
	return rd.sent
}

// waiting waits until n other callers wait for the latest read of the node.
func waiting(t *testing.T, r *nodeReads, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		got := 0
		if rd := r.reads[name]; rd != nil {
			got = rd.waited
		}
		r.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers wait for the read of node %s; want %d", got, name, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNodeReadsShareAReadSentAfterTheDecision: two syncs decided before a read of a node was sent
// take its answer, in flight or finished: one GET for all of them.
func TestNodeReadsShareAReadSentAfterTheDecision(t *testing.T) {
	api, c := newHeldNodes(t)
	r := newNodeReads()
	decided := time.Now().Add(-time.Second)
	ctx := context.Background()

	first := getAsync(ctx, r, c, "n1", decided)
	g := api.next(t)
	second := getAsync(ctx, r, c, "n1", decided)
	waiting(t, r, "n1", 1)
	api.none(t, "the read in flight was sent after the second caller's decision")
	g.reply <- http.StatusOK
	for who, ch := range map[string]<-chan answer{"the sender": first, "the waiter": second} {
		if a := wait(t, ch, who); a.err != nil || a.node == nil || a.node.Name != "n1" {
			t.Errorf("%s got %v, %v; want node n1", who, a.node, a.err)
		}
	}
	// Finished: a third sync decided before it was sent takes its answer without a request.
	if n, err := r.get(ctx, c, "n1", decided); err != nil || n == nil || n.Name != "n1" {
		t.Errorf("the read finished: got %v, %v; want node n1", n, err)
	}
	if got := api.count(); got != 1 {
		t.Errorf("the API server got %d GETs of node n1; want 1, shared", got)
	}
}

// TestNodeReadsNeverShareAReadSentAtOrBeforeTheDecision: a sync that decided when a read was
// sent, or after, sends its own, whether that read is still in flight or answered: the node may
// have changed between the read and the decision.
func TestNodeReadsNeverShareAReadSentAtOrBeforeTheDecision(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		finished bool
		// decided is the second sync's decision time, given when the first read was sent.
		decided func(sent time.Time) time.Time
	}{
		{"decided when the read in flight was sent", false, func(sent time.Time) time.Time { return sent }},
		{"decided after the read in flight was sent", false, func(time.Time) time.Time { return time.Now() }},
		{"decided when the finished read was sent", true, func(sent time.Time) time.Time { return sent }},
		{"decided after the finished read was sent", true, func(time.Time) time.Time { return time.Now() }},
		{"decided at no known time", false, func(time.Time) time.Time { return time.Time{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, c := newHeldNodes(t)
			r := newNodeReads()
			first := getAsync(ctx, r, c, "n1", time.Now().Add(-time.Second))
			g := api.next(t)
			sent := sentAt(t, r, "n1")
			if tc.finished {
				g.reply <- http.StatusOK
				wait(t, first, "the first caller")
			}
			own := getAsync(ctx, r, c, "n1", tc.decided(sent))
			api.next(t).reply <- http.StatusOK
			if a := wait(t, own, "the second caller"); a.err != nil || a.node == nil {
				t.Fatalf("the second caller got %v, %v", a.node, a.err)
			}
			if !tc.finished {
				g.reply <- http.StatusOK
				wait(t, first, "the first caller")
			}
			if got := api.count(); got != 2 {
				t.Errorf("the API server got %d GETs; want 2: none shared", got)
			}
		})
	}
}

// TestNodeReadsNeverShareAFailedRead: a read that failed answered nothing about the node: its
// sender gets the error, a caller that waited for it reads again.
func TestNodeReadsNeverShareAFailedRead(t *testing.T) {
	api, c := newHeldNodes(t)
	r := newNodeReads()
	decided := time.Now().Add(-time.Second)
	ctx := context.Background()

	first := getAsync(ctx, r, c, "n1", decided)
	g := api.next(t)
	second := getAsync(ctx, r, c, "n1", decided)
	waiting(t, r, "n1", 1)
	g.reply <- http.StatusInternalServerError
	if a := wait(t, first, "the sender"); !apierrors.IsInternalError(a.err) {
		t.Fatalf("the sender got %v, %v; want its 500", a.node, a.err)
	}
	api.next(t).reply <- http.StatusOK
	if a := wait(t, second, "the waiter"); a.err != nil || a.node == nil || a.node.Name != "n1" {
		t.Errorf("the waiter got %v, %v; want node n1 on its own read", a.node, a.err)
	}
	// The failed read is not held: a later caller takes the waiter's read, not the failure.
	if n, err := r.get(ctx, c, "n1", decided); err != nil || n == nil {
		t.Errorf("after the failure: got %v, %v; want the node", n, err)
	}
	if got := api.count(); got != 2 {
		t.Errorf("the API server got %d GETs; want 2", got)
	}
}

// TestNodeReadsShareNotFound: a node that is gone is an answer: it is shared like a node.
func TestNodeReadsShareNotFound(t *testing.T) {
	api, c := newHeldNodes(t)
	r := newNodeReads()
	decided := time.Now().Add(-time.Second)
	ctx := context.Background()

	first := getAsync(ctx, r, c, "n1", decided)
	g := api.next(t)
	second := getAsync(ctx, r, c, "n1", decided)
	waiting(t, r, "n1", 1)
	api.none(t, "the read in flight was sent after the decision")
	g.reply <- http.StatusNotFound
	for who, ch := range map[string]<-chan answer{"the sender": first, "the waiter": second} {
		if a := wait(t, ch, who); !apierrors.IsNotFound(a.err) || a.node != nil {
			t.Errorf("%s got %v, %v; want NotFound", who, a.node, a.err)
		}
	}
	if _, err := r.get(ctx, c, "n1", decided); !apierrors.IsNotFound(err) {
		t.Errorf("the read finished: got %v; want NotFound", err)
	}
	if got := api.count(); got != 1 {
		t.Errorf("the API server got %d GETs; want 1", got)
	}
}

// TestNodeReadsWaiterHonoursItsContext: a caller whose context ends stops waiting; the read goes
// on for the others.
func TestNodeReadsWaiterHonoursItsContext(t *testing.T) {
	api, c := newHeldNodes(t)
	r := newNodeReads()
	decided := time.Now().Add(-time.Second)

	first := getAsync(context.Background(), r, c, "n1", decided)
	g := api.next(t)
	ctx, cancel := context.WithCancel(context.Background())
	impatient := getAsync(ctx, r, c, "n1", decided)
	patient := getAsync(context.Background(), r, c, "n1", decided)
	waiting(t, r, "n1", 2)
	cancel()
	if a := wait(t, impatient, "the caller whose context ended"); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("the caller whose context ended got %v, %v; want %v", a.node, a.err, context.Canceled)
	}
	api.none(t, "the read in flight goes on")
	g.reply <- http.StatusOK
	for who, ch := range map[string]<-chan answer{"the sender": first, "the other waiter": patient} {
		if a := wait(t, ch, who); a.err != nil || a.node == nil {
			t.Errorf("%s got %v, %v; want the node", who, a.node, a.err)
		}
	}
	if got := api.count(); got != 1 {
		t.Errorf("the API server got %d GETs; want 1", got)
	}
}

// TestNodeReadsAreBounded: finished reads older than nodeReadsKept are forgotten, and no more
// than nodeReadsHeld nodes' reads are ever held.
func TestNodeReadsAreBounded(t *testing.T) {
	c := kubefake.NewClientset()
	r := newNodeReads()
	ctx := context.Background()
	most := 0
	for i := range nodeReadsHeld + 100 {
		if _, err := r.get(ctx, c, fmt.Sprintf("n%d", i), time.Time{}); !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		most = max(most, r.held())
	}
	if most > nodeReadsHeld || r.held() >= nodeReadsHeld {
		t.Errorf("held at most %d reads, %d at the end; want at most %d", most, r.held(), nodeReadsHeld)
	}

	r = newNodeReads()
	if _, err := r.get(ctx, c, "old", time.Time{}); !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.reads["old"].sent = r.reads["old"].sent.Add(-nodeReadsKept - time.Second)
	r.swept = r.swept.Add(-nodeReadsSweep - time.Second)
	r.mu.Unlock()
	if _, err := r.get(ctx, c, "new", time.Time{}); !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	r.mu.Lock()
	_, old := r.reads["old"]
	_, recent := r.reads["new"]
	r.mu.Unlock()
	if old || !recent {
		t.Errorf("held: the old read %t, the new one %t; want only the new one", old, recent)
	}
}
