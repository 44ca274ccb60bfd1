package celldstore

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

func startAlone(t *testing.T, peer string, opts ...func(*Config)) *Node {
	t.Helper()
	self := listen(t, "127.0.0.1:0")
	cfg := Config{
		Durability: DurabilityFleet, FleetUID: "uid", Member: "m", DataDir: t.TempDir(),
		ClientAddr: "127.0.0.1:0", Interval: time.Hour, Log: zerolog.Nop(), peerListener: self,
		Discover: func(context.Context) ([]string, error) { return []string{self.Addr().String(), peer}, nil },
	}
	for _, o := range opts {
		o(&cfg)
	}
	n, err := Start(cfg)
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

// A member whose disk is full is not ready, says so, and is ready again once the disk has room,
// without a restart: the disk it reports is the one it sees (statfs of its data folder).
func TestFullDiskIsNotReadyUntilItGrows(t *testing.T) {
	fake := &fakePeer{}
	fake.set("disk-1")
	srv := httptest.NewServer(fake)
	defer srv.Close()
	var blocks, avail atomic.Uint64
	blocks.Store(16 << 10)
	avail.Store(100) // 400 KiB of 4 KiB blocks: less than two values
	n := startAlone(t, strings.TrimPrefix(srv.URL, "http://"), func(c *Config) {
		c.statfs = func(_ string, s *syscall.Statfs_t) error {
			s.Bsize, s.Blocks, s.Bfree, s.Bavail = 4096, blocks.Load(), avail.Load(), avail.Load()
			return nil
		}
	})
	if ok, why := n.Ready(context.Background()); ok || !strings.Contains(why, "data disk full") {
		t.Fatalf("a full disk: ready %v (%s), want not ready saying the disk is full", ok, why)
	}
	resp, err := http.Get("http://" + n.ClientAddr() + "/v1/disk")
	if err != nil {
		t.Fatal(err)
	}
	var d Disk
	err = json.NewDecoder(resp.Body).Decode(&d)
	resp.Body.Close()
	if err != nil || d.TotalBytes != 64<<20 || d.AvailableBytes != 100*4096 || d.Path == "" {
		t.Fatalf("GET /v1/disk: %+v, %v; want 64 MiB in all, 400 KiB available", d, err)
	}
	blocks.Store(64 << 10)
	avail.Store(48 << 10)
	if ok, why := n.Ready(context.Background()); !ok {
		t.Fatalf("the disk grown: not ready: %s", why)
	}
}

// Without a fake, the disk is the data folder's real filesystem.
func TestDiskIsTheDataFolders(t *testing.T) {
	n := startAlone(t, "127.0.0.1:1")
	d, err := n.Disk()
	if err != nil || d.TotalBytes <= 0 || d.AvailableBytes > d.FreeBytes || d.FreeBytes > d.TotalBytes {
		t.Fatalf("Disk() = %+v, %v", d, err)
	}
}
