package celldstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/celld/celld-operator/e2e/celldstore/load"
)

const testInterval = 50 * time.Millisecond

// testFleet runs members in this process on loopback ports. A member keeps its ports across
// restarts, as a StatefulSet's Pod keeps its DNS name; membership is what discovery returns.
type testFleet struct {
	t        *testing.T
	root     string
	uid      string
	bucket   string // endpoint, for bucket durability
	logs     *syncBuffer
	mu       sync.Mutex
	members  []string // discovery's answer, by name
	peerAddr map[string]string
	client   map[string]string
	nodes    map[string]*Node
}

func newTestFleet(t *testing.T) *testFleet {
	f := &testFleet{t: t, root: t.TempDir(), uid: "uid-" + t.Name(), logs: &syncBuffer{}, peerAddr: map[string]string{}, client: map[string]string{}, nodes: map[string]*Node{}}
	// Registered after the TempDir above, so members stop before their directories go.
	t.Cleanup(func() {
		f.mu.Lock()
		nodes := f.nodes
		f.nodes = map[string]*Node{}
		f.mu.Unlock()
		for _, n := range nodes {
			n.Stop()
		}
		if t.Failed() || os.Getenv("CELLD_TEST_LOGS") != "" {
			t.Logf("member logs:\n%s", f.logs.String())
		}
	})
	return f
}

// dir is a new, empty directory for a member.
func (f *testFleet) dir() string {
	f.t.Helper()
	d, err := os.MkdirTemp(f.root, "member-")
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

func (f *testFleet) discover(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var addrs []string
	for _, m := range f.members {
		addrs = append(addrs, f.peerAddr[m])
	}
	return addrs, nil
}

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	var err error
	for range 50 { // the port a stopped member held may take a moment to free
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, port, _ := net.SplitHostPort(addr)
	out, _ := exec.Command("sh", "-c", "ss -tanp | grep :"+port).CombinedOutput()
	t.Fatalf("listen %s: %v\n%s", addr, err, out)
	return nil
}

// start starts member name on dir, on the member's ports if it ran before.
func (f *testFleet) start(name, dir string, opts ...func(*Config)) *Node {
	f.t.Helper()
	f.mu.Lock()
	peerAddr, clientAddr, running := f.peerAddr[name], f.client[name], f.nodes[name] != nil
	f.mu.Unlock()
	if running {
		f.t.Fatalf("%s is running already", name)
	}
	if peerAddr == "" {
		peerAddr, clientAddr = "127.0.0.1:0", "127.0.0.1:0"
	}
	durability := DurabilityFleet
	if f.bucket != "" {
		durability = DurabilityBucket
	}
	cfg := Config{
		Durability: durability, Fleet: "test", FleetUID: f.uid, Member: name,
		DataDir: dir, Discover: f.discover, Interval: testInterval,
		Bucket:       BucketConfig{Name: "fleet-bucket", Endpoint: f.bucket},
		Log:          zerolog.New(f.logs).With().Timestamp().Str("member", name).Logger(),
		peerListener: listen(f.t, peerAddr), clientListener: listen(f.t, clientAddr),
	}
	for _, o := range opts {
		o(&cfg)
	}
	n, err := Start(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peerAddr[name], f.client[name], f.nodes[name] = n.PeerAddr(), n.ClientAddr(), n
	found := false
	for _, m := range f.members {
		found = found || m == name
	}
	if !found {
		f.members = append(f.members, name)
	}
	return n
}

// kill stops members at once; they stay members (their Pods would still exist).
func (f *testFleet) kill(names ...string) {
	var wg sync.WaitGroup
	for _, name := range names {
		f.mu.Lock()
		n := f.nodes[name]
		delete(f.nodes, name)
		f.mu.Unlock()
		if n != nil {
			wg.Go(n.Stop)
		}
	}
	wg.Wait()
}

// remove kills a member and takes it out of discovery, as a scale-in does.
func (f *testFleet) remove(name string) {
	f.kill(name)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, m := range f.members {
		if m == name {
			f.members = append(f.members[:i], f.members[i+1:]...)
			break
		}
	}
}

func (f *testFleet) clientAddrs(names ...string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, n := range names {
		out = append(out, f.client[n])
	}
	return out
}

func readyz(addr string) (int, string) {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(bytes.TrimSpace(b))
}

// waitReady waits until every named member answers /readyz with 200.
func (f *testFleet) waitReady(names ...string) {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, name := range names {
		for {
			code, why := readyz(f.clientAddrs(name)[0])
			if code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				f.t.Fatalf("%s not ready after 20s: %d %s", name, code, why)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// keysOf returns GET /v1/keys of a member.
func keysOf(t *testing.T, addr string) map[string]string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/keys")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l Listing
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	return l.Keys
}

// writer runs celld-load's writer in the background.
type writer struct {
	cancel  context.CancelFunc
	done    chan struct{}
	stats   load.WriteStats
	err     error
	journal string
	mu      sync.Mutex
	acked   int
	notify  chan struct{}
}

func startWriter(t *testing.T, rate float64, addrs []string) *writer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cancel: cancel, done: make(chan struct{}), journal: t.TempDir() + "/journal.jsonl", notify: make(chan struct{}, 1)}
	go func() {
		defer close(w.done)
		w.stats, w.err = load.Write(ctx, load.WriteConfig{Members: addrs, Journal: w.journal, Workers: 4, Rate: rate, OnAck: func(load.Record) {
			w.mu.Lock()
			w.acked++
			w.mu.Unlock()
			select {
			case w.notify <- struct{}{}:
			default:
			}
		}})
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked
}

// waitAcked waits until n more writes are acknowledged than when it was called.
func (w *writer) waitAcked(t *testing.T, n int) {
	t.Helper()
	want := w.count() + n
	deadline := time.After(20 * time.Second)
	for w.count() < want {
		select {
		case <-w.notify:
		case <-deadline:
			t.Fatalf("%d writes acknowledged, want %d", w.count(), want)
		}
	}
}

func (w *writer) stop() {
	w.cancel()
	<-w.done
}

func (w *writer) records(t *testing.T) []load.Record {
	t.Helper()
	rs, err := load.ReadJournal(w.journal)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%d", i)
	}
	sort.Strings(out)
	return out
}
