package celldstore

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// fakePeer answers the peer protocol for member "x" with the keys and disk the test sets.
type fakePeer struct {
	mu          sync.Mutex
	incarnation string
	keys        []string
}

func (p *fakePeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := Hello{Member: "x", FleetUID: "uid", Incarnation: p.incarnation, Epoch: "e1"}
	switch r.URL.Path {
	case "/peer/v1/hello":
		_ = json.NewEncoder(w).Encode(h)
	case "/peer/v1/keys":
		l := peerListing{Hello: h, Next: len(p.keys), Keys: p.keys}
		if r.URL.Query().Get("since") == strconv.Itoa(len(p.keys)) && len(p.keys) > 0 {
			l.From, l.Keys = l.Next, nil
		}
		_ = json.NewEncoder(w).Encode(l)
	default:
		key := strings.TrimPrefix(r.URL.Path, "/peer/v1/keys/")
		for _, k := range p.keys {
			if k == key {
				_, _ = w.Write([]byte("v"))
				return
			}
		}
		http.NotFound(w, r)
	}
}

func (p *fakePeer) set(incarnation string, keys ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.incarnation, p.keys = incarnation, keys
}

func startAlone(t *testing.T, peer string) *Node {
	t.Helper()
	self := listen(t, "127.0.0.1:0")
	n, err := Start(Config{
		Durability: DurabilityFleet, FleetUID: "uid", Member: "m", DataDir: t.TempDir(),
		ClientAddr: "127.0.0.1:0", Interval: time.Hour, Log: zerolog.Nop(), peerListener: self,
		Discover: func(context.Context) ([]string, error) { return []string{self.Addr().String(), peer}, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	for deadline := time.Now().Add(5 * time.Second); !n.isRecovered(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) { // the first round runs at once; the next an hour later
			t.Fatal("not caught up after its first round")
		}
	}
	return n
}

func (n *Node) isRecovered() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.recovered
}

// A peer back on a new disk (same name, new incarnation) holds none of the copies counted for
// it: the next probe already says so, without waiting for a round.
func TestPeerOnANewDiskLosesItsCopiesAtOnce(t *testing.T) {
	fake := &fakePeer{}
	fake.set("disk-1")
	srv := httptest.NewServer(fake)
	defer srv.Close()
	n := startAlone(t, strings.TrimPrefix(srv.URL, "http://"))
	if err := n.storeLocal("k", []byte("v"), "x"); err != nil {
		t.Fatal(err)
	}
	if ok, why := n.Ready(context.Background()); !ok {
		t.Fatalf("k on m and x: not ready: %s", why)
	}
	fake.set("disk-2")
	if ok, _ := n.Ready(context.Background()); ok {
		t.Fatal("ready while x came back on a new disk without k")
	}
	fake.set("disk-2", "k")
	if err := n.list(context.Background(), "x", strings.TrimPrefix(srv.URL, "http://")); err != nil {
		t.Fatal(err)
	}
	if ok, why := n.Ready(context.Background()); !ok {
		t.Fatalf("x lists k again: not ready: %s", why)
	}
}

// A copy noted for a peer whose store then failed is forgotten at the next full listing.
func TestFullListingForgetsCopiesAPeerNeverStored(t *testing.T) {
	fake := &fakePeer{}
	fake.set("disk-1", "a", "b")
	srv := httptest.NewServer(fake)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	n := startAlone(t, addr)
	if err := n.storeLocal("k", []byte("v"), "x"); err != nil {
		t.Fatal(err)
	}
	for range fullEvery - 1 {
		if err := n.list(context.Background(), "x", addr); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := n.Ready(context.Background()); ok {
		t.Fatal("ready: x never held k, and a full listing came by")
	}
}
