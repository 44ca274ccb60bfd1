//go:build faults

package kube

// Fault injection is compiled only into test builds (go build -tags faults): the production
// binary has no way to fail its own requests.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// FaultKind is one way an injected fault fails a request.
type FaultKind string

// The faults InjectFaults chooses from. Each is something a real API server or network does; the
// one that matters most is FaultResponseLost: the write was applied, and the operator does not
// know it, so only an idempotent operator survives it.
const (
	// FaultInternalError answers 500 with a Status body, without sending the request.
	FaultInternalError FaultKind = "internal_error"
	// FaultConflict answers a write 409 Conflict, without sending it.
	FaultConflict FaultKind = "conflict"
	// FaultTooManyRequests answers 429 with a Retry-After, without sending the request; client-go
	// waits and retries it on its own, as it does with a server under load.
	FaultTooManyRequests FaultKind = "too_many_requests"
	// FaultTimeout fails the request with a timeout before it is sent.
	FaultTimeout FaultKind = "timeout"
	// FaultResponseLost sends the request, lets the API server apply it, then fails it with a
	// timeout: the response never arrives.
	FaultResponseLost FaultKind = "response_lost"
	// FaultWatchDropped lets a watch start, then ends its stream after a random time, as a broken
	// connection or an API server restart does. A watch is one request that lasts minutes: besides
	// the share of watch requests dropped within maxWatchLife, every other watch stream breaks
	// after a random life of mean maxWatchLife/rate (50s at a rate of 0.1), so that watches keep
	// breaking for as long as the operator runs. A drop is counted when the stream is cut.
	FaultWatchDropped FaultKind = "watch_dropped"
)

// FaultKinds lists every kind, in the order of the metric's documentation.
var FaultKinds = []FaultKind{FaultInternalError, FaultConflict, FaultTooManyRequests, FaultTimeout, FaultResponseLost, FaultWatchDropped}

var (
	writeFaults = []FaultKind{FaultInternalError, FaultConflict, FaultTooManyRequests, FaultTimeout, FaultResponseLost}
	readFaults  = []FaultKind{FaultInternalError, FaultTooManyRequests, FaultTimeout, FaultResponseLost}
	watchFaults = []FaultKind{FaultInternalError, FaultTooManyRequests, FaultTimeout, FaultWatchDropped}
)

// Faults configures InjectFaults.
type Faults struct {
	// Rate is the share of requests failed, from 0 to 1.
	Rate float64
	// Seed makes the sequence of decisions reproducible. Which request meets which decision still
	// depends on the order concurrent requests reach the transport.
	Seed uint64
}

const (
	// faultRetryAfter is the Retry-After of an injected 429, in seconds.
	faultRetryAfter = 1
	// maxFaultDelay bounds how long an injected timeout waits before failing: a timeout takes time.
	maxFaultDelay = 500 * time.Millisecond
	// maxWatchLife bounds how long a dropped watch streams before it ends.
	maxWatchLife = 5 * time.Second
)

// InjectFaults makes every client built from cfg fail a seeded share of its requests, for testing
// resilience: the operator must converge, break no safety clause and not spin on errors. Call it
// before CountRequests, so that the faults sit under the counters and every request the operator
// makes is counted, failed or not; each fault is counted in m by kind.
func InjectFaults(cfg *rest.Config, f Faults, m *Metrics) {
	inj := newFaultInjector(f, m)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &faultTransport{next: rt, inj: inj} })
}

// faultInjector holds the decisions shared by every client's transport.
type faultInjector struct {
	rate float64
	m    *Metrics
	// kinds, when set, replaces the kinds a request may meet (tests force one kind with it).
	kinds        []FaultKind
	maxDelay     time.Duration
	maxWatchLife time.Duration

	mu  sync.Mutex
	rnd *rand.Rand
}

func newFaultInjector(f Faults, m *Metrics) *faultInjector {
	return &faultInjector{
		rate: f.Rate, m: m, maxDelay: maxFaultDelay, maxWatchLife: maxWatchLife,
		rnd: rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15)),
	}
}

// watchLife draws the life of a watch stream that did not fail at its start: exponential, of mean
// maxWatchLife/rate.
func (inj *faultInjector) watchLife() time.Duration {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	return time.Duration(inj.rnd.ExpFloat64() * float64(inj.maxWatchLife) / inj.rate)
}

// decide draws whether a request fails, how, and the duration the fault needs (a timeout's delay,
// a dropped watch's life); "" for a request left alone.
func (inj *faultInjector) decide(verb string) (FaultKind, time.Duration) {
	kinds := readFaults
	switch {
	case verb == "watch":
		kinds = watchFaults
	case writeVerbs[verb]:
		kinds = writeFaults
	}
	inj.mu.Lock()
	defer inj.mu.Unlock()
	if inj.rnd.Float64() >= inj.rate {
		return "", 0
	}
	if inj.kinds != nil {
		kinds = applicable(inj.kinds, kinds)
		if len(kinds) == 0 {
			return "", 0
		}
	}
	kind := kinds[inj.rnd.IntN(len(kinds))]
	var d time.Duration
	switch kind {
	case FaultTimeout:
		d = time.Duration(inj.rnd.Int64N(int64(inj.maxDelay) + 1))
	case FaultWatchDropped:
		d = time.Duration(inj.rnd.Int64N(int64(inj.maxWatchLife) + 1))
	}
	return kind, d
}

func applicable(want, possible []FaultKind) []FaultKind {
	var out []FaultKind
	for _, k := range want {
		for _, p := range possible {
			if k == p {
				out = append(out, k)
			}
		}
	}
	return out
}

var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "apply": true, "delete": true}

type faultTransport struct {
	next http.RoundTripper
	inj  *faultInjector
}

func (t *faultTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb := requestVerb(req)
	kind, d := t.inj.decide(verb)
	switch {
	case kind == "" && verb == "watch" && t.inj.rate > 0 && t.inj.kinds == nil:
		kind, d = FaultWatchDropped, t.inj.watchLife()
	case kind == "":
		return t.next.RoundTrip(req)
	case kind != FaultWatchDropped:
		t.inj.m.faults.WithLabelValues(string(kind)).Inc()
	}
	switch kind {
	case FaultResponseLost:
		resp, err := t.next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		// Read the whole answer, so the request is complete on the server's side, then lose it.
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, &faultTimeout{what: "response lost after the request was sent"}
	case FaultWatchDropped:
		resp, err := t.next.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			return resp, err
		}
		resp.Body = newDroppingBody(resp.Body, d, t.inj.m.faults.WithLabelValues(string(FaultWatchDropped)).Inc)
		return resp, nil
	}
	// The rest are decided without the API server: the request is never sent.
	if req.Body != nil {
		req.Body.Close()
	}
	switch kind {
	case FaultTimeout:
		if err := sleep(req, d); err != nil {
			return nil, err
		}
		return nil, &faultTimeout{what: "timeout before the request was sent"}
	case FaultConflict:
		gr, name := groupResourceName(req.URL.Path)
		return statusResponse(req, apierrors.NewConflict(gr, name, errors.New("injected fault: the object has been modified")).ErrStatus, 0), nil
	case FaultTooManyRequests:
		return statusResponse(req, apierrors.NewTooManyRequests("injected fault: too many requests", faultRetryAfter).ErrStatus, faultRetryAfter), nil
	default:
		return statusResponse(req, apierrors.NewInternalError(errors.New("injected fault")).ErrStatus, 0), nil
	}
}

func sleep(req *http.Request, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-req.Context().Done():
		return req.Context().Err()
	}
}

// faultTimeout is a net.Error that says it is a timeout, as the transport's own would.
type faultTimeout struct{ what string }

func (e *faultTimeout) Error() string   { return "injected fault: " + e.what }
func (e *faultTimeout) Timeout() bool   { return true }
func (e *faultTimeout) Temporary() bool { return true }

// statusResponse is the answer an API server gives with a Status body.
func statusResponse(req *http.Request, st metav1.Status, retryAfter int) *http.Response {
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	body, _ := json.Marshal(st)
	h := http.Header{"Content-Type": []string{"application/json"}}
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	return &http.Response{
		StatusCode: int(st.Code), Status: fmt.Sprintf("%d %s", st.Code, http.StatusText(int(st.Code))),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}

// groupResourceName reads the group, resource and object name of an API path, for a conflict's
// message: /apis/apps/v1/namespaces/ns/statefulsets/x -> apps, statefulsets, x.
func groupResourceName(path string) (schema.GroupResource, string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var gr schema.GroupResource
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		gr.Group, parts = parts[1], parts[3:]
	default:
		return gr, ""
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) > 0 {
		gr.Resource = parts[0]
	}
	if len(parts) > 1 {
		return gr, parts[1]
	}
	return gr, ""
}

// droppingBody is a watch stream that breaks after its life: the read in progress, or the next
// one, fails as a connection closed mid-stream does.
type droppingBody struct {
	body    io.ReadCloser
	timer   *time.Timer
	mu      sync.Mutex
	dropped bool
}

func newDroppingBody(body io.ReadCloser, life time.Duration, onDrop func()) *droppingBody {
	b := &droppingBody{body: body}
	b.timer = time.AfterFunc(life, func() {
		b.mu.Lock()
		b.dropped = true
		b.mu.Unlock()
		onDrop()
		// Closing the body ends a read blocked on the network.
		b.body.Close()
	})
	return b
}

func (b *droppingBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.mu.Lock()
	dropped := b.dropped
	b.mu.Unlock()
	if dropped {
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *droppingBody) Close() error {
	b.timer.Stop()
	return b.body.Close()
}

// Stall holds every write to one resource for a while before it is sent, as an overloaded API
// server or a slow network does; a request whose context ends meanwhile is never sent. Tests use
// it to hold a sync mid-flight.
type Stall struct {
	// Resource is the resource[/subresource] whose writes are held, as api_writes_total names it.
	Resource string
	For      time.Duration
}

// StallWrites makes every client built from cfg hold the writes s names. Each hold is counted in
// m as a fault of kind "stall" when it begins.
func StallWrites(cfg *rest.Config, s Stall, m *Metrics) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &stallTransport{next: rt, s: s, m: m} })
}

type stallTransport struct {
	next http.RoundTripper
	s    Stall
	m    *Metrics
}

func (t *stallTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if writeVerb(req) != "" && resourceOf(req.URL.Path) == t.s.Resource {
		t.m.faults.WithLabelValues("stall").Inc()
		if err := sleep(req, t.s.For); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
	}
	return t.next.RoundTrip(req)
}
