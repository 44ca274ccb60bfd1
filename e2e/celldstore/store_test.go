package celldstore

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func TestStoreKeepsKeysAndIdentityAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Put(fmt.Sprintf("k%d", i), []byte(fmt.Sprintf("v%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put("k1", []byte("again")); err != nil {
		t.Fatal(err)
	}
	// A write cut short by a crash leaves a temporary file, never a key.
	if err := os.WriteFile(filepath.Join(dir, "keys", ".tmp-123"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := OpenStore(dir, "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if r.Incarnation() != s.Incarnation() {
		t.Errorf("incarnation changed on reopen: %s, then %s", s.Incarnation(), r.Incarnation())
	}
	want := map[string]string{"k0": Hash([]byte("v0")), "k1": Hash([]byte("again")), "k2": Hash([]byte("v2"))}
	if got := r.Hashes(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reopened store holds %v, want %v", got, want)
	}
	v, ok, err := r.Get("k1")
	if err != nil || !ok || string(v) != "again" {
		t.Errorf("Get(k1) = %q %v %v", v, ok, err)
	}
	if _, ok, _ := r.Get("absent"); ok {
		t.Error("Get of an absent key found one")
	}
	if _, err := os.Stat(filepath.Join(dir, "keys", ".tmp-123")); !os.IsNotExist(err) {
		t.Errorf("temporary file left after reopen: %v", err)
	}

	fresh, err := OpenStore(t.TempDir(), "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Incarnation() == s.Incarnation() {
		t.Error("an empty directory got the incarnation of another")
	}
	if _, err := OpenStore(dir, "uid-2"); err == nil || !strings.Contains(err.Error(), "belongs to fleet UID uid-1") {
		t.Errorf("another fleet's disk opened: %v", err)
	}
}

func TestStoreRefusesKeysThatAreNotPlainNames(t *testing.T) {
	s, err := OpenStore(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"", ".", "..", ".tmp-1", "a/b", "../x", "a b", strings.Repeat("x", 201)} {
		if err := s.Put(k, []byte("v")); err == nil {
			t.Errorf("Put(%q) accepted", k)
		}
	}
	for _, k := range []string{"a", "A-1_b.c", strings.Repeat("x", 200)} {
		if err := s.Put(k, []byte("v")); err != nil {
			t.Errorf("Put(%q): %v", k, err)
		}
	}
}

func TestStoreSinceIsACursor(t *testing.T) {
	s, err := OpenStore(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Put("a", nil)
	_ = s.Put("b", nil)
	keys, next := s.Since(0)
	if !slices.Equal(keys, []string{"a", "b"}) || next != 2 {
		t.Fatalf("Since(0) = %v %d", keys, next)
	}
	_ = s.Put("a", []byte("overwritten"))
	_ = s.Put("c", nil)
	if keys, next = s.Since(next); !slices.Equal(keys, []string{"c"}) || next != 3 {
		t.Fatalf("Since(2) = %v %d; an overwrite is not a new key", keys, next)
	}
	if keys, _ = s.Since(99); len(keys) != 3 {
		t.Fatalf("a cursor past the end (another process's) lists everything: %v", keys)
	}
}

func TestOwnersOfASubsetKeepTheirOrder(t *testing.T) {
	all := []string{"celld-0", "celld-1", "celld-2", "celld-3", "celld-4"}
	count := map[string]int{}
	const keys = 2000
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		ranked := Owners(k, all, len(all))
		for _, m := range ranked[:Replicas] {
			count[m]++
		}
		for drop := range all {
			sub := slices.Delete(slices.Clone(all), drop, drop+1)
			want := slices.DeleteFunc(slices.Clone(ranked), func(m string) bool { return m == all[drop] })[:Replicas]
			if got := Owners(k, sub, Replicas); !slices.Equal(got, want) {
				t.Fatalf("%s: owners among %v are %v, want %v (the ranking over all, %v, less %s)", k, sub, got, want, ranked, all[drop])
			}
			for _, m := range sub {
				if owns(m, k, sub, Replicas) != slices.Contains(want, m) {
					t.Fatalf("%s: owns(%s) disagrees with Owners %v", k, m, want)
				}
			}
		}
	}
	for _, m := range all {
		// Each member owns Replicas/len(all) of the keys; a lopsided hash would skew this.
		if share := float64(count[m]) / keys; share < 0.3 || share > 0.5 {
			t.Errorf("%s owns %.2f of the keys, want about 0.4", m, share)
		}
	}
}

// fakeDNS answers SRV queries for _peer._tcp.<domain> with srv, and fails everything else, as a
// resolver without the records would.
func fakeDNS(t *testing.T, srv []dnsmessage.SRVResource) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			// A Conn that is no PacketConn gets DNS over TCP's framing: a two-byte length first.
			var size [2]byte
			if _, err := io.ReadFull(server, size[:]); err != nil {
				return
			}
			buf := make([]byte, int(size[0])<<8|int(size[1]))
			if _, err := io.ReadFull(server, buf); err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf)
			if err != nil {
				return
			}
			q, err := p.Question()
			if err != nil {
				return
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: dnsmessage.RCodeNameError})
			if q.Type == dnsmessage.TypeSRV && len(srv) > 0 {
				b = dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
			}
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			if q.Type == dnsmessage.TypeSRV {
				for _, r := range srv {
					_ = b.SRVResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5}, r)
				}
			}
			out, err := b.Finish()
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = server.Write(append([]byte{byte(len(out) >> 8), byte(len(out))}, out...))
		}()
		return client, nil
	}}
}

func TestDiscovery(t *testing.T) {
	got, err := StaticPeers(" a:1, b:2,,")(context.Background())
	if err != nil || !slices.Equal(got, []string{"a:1", "b:2"}) {
		t.Errorf("StaticPeers = %v %v", got, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := fakeDNS(t, []dnsmessage.SRVResource{
		{Target: dnsmessage.MustNewName("f-1.f-peers.ns.svc.cluster.local."), Port: 7001},
		{Target: dnsmessage.MustNewName("f-0.f-peers.ns.svc.cluster.local."), Port: 7001},
	})
	got, err = DNSPeers(r, "f-peers.ns.svc.cluster.local", 7001)(ctx)
	want := []string{"f-0.f-peers.ns.svc.cluster.local:7001", "f-1.f-peers.ns.svc.cluster.local:7001"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("DNSPeers from SRV = %v %v, want %v", got, err, want)
	}
	// No SRV records: the A records (localhost's, from the hosts file) with the peer port.
	got, err = DNSPeers(fakeDNS(t, nil), "localhost", 7001)(ctx)
	if err != nil || !slices.Contains(got, "127.0.0.1:7001") {
		t.Errorf("DNSPeers from A records = %v %v", got, err)
	}
}

func TestFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	c, err := FromEnv(env("CELLD_MEMBER_NAME", "f-0", "CELLD_PEER_DOMAIN", "f-peers.ns.svc", "CELLD_CLIENT_PORT", "8000", "CELLD_PEER_PORT", "8001"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Durability != DurabilityFleet || c.DataDir != "/var/lib/celld" || c.ClientAddr != ":8000" || c.PeerAddr != ":8001" || c.Discover == nil {
		t.Errorf("fleet defaults: %+v", c)
	}
	c, err = FromEnv(env("CELLD_MEMBER_NAME", "m", "CELLD_PEERS", "127.0.0.1:1,127.0.0.1:2", "CELLD_SYNC_INTERVAL", "20ms"))
	if err != nil {
		t.Fatal(err)
	}
	if addrs, _ := c.Discover(context.Background()); len(addrs) != 2 || c.Interval.Milliseconds() != 20 {
		t.Errorf("CELLD_PEERS: %v, interval %v", addrs, c.Interval)
	}
	for _, bad := range [][]string{
		{"CELLD_MEMBER_NAME", "m"}, // fleet without peers
		{"CELLD_MEMBER_NAME", "m", "CELLD_DURABILITY", "bucket", "CELLD_BUCKET_NAME", "b"}, // no endpoint
		{"CELLD_MEMBER_NAME", "m", "CELLD_DURABILITY", "disk", "CELLD_PEERS", "a:1"},
		{"CELLD_MEMBER_NAME", "m", "CELLD_PEERS", "a:1", "CELLD_CLIENT_PORT", "http"},
		{"CELLD_MEMBER_NAME", "m", "CELLD_PEERS", "a:1", "CELLD_SYNC_INTERVAL", "-1s"},
	} {
		if _, err := FromEnv(env(bad...)); err == nil {
			t.Errorf("FromEnv(%v) accepted", bad)
		}
	}
	c, err = FromEnv(env("CELLD_MEMBER_NAME", "m", "CELLD_DURABILITY", "bucket", "CELLD_BUCKET_NAME", "b", "CELLD_BUCKET_ENDPOINT", "http://s:9000"))
	if err != nil || c.Bucket.Endpoint != "http://s:9000" || c.DataDir != "/var/lib/celld" {
		t.Errorf("bucket: %+v %v", c, err)
	}
}
