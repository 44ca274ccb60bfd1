package celldstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// maxValue bounds one value; the stand-in keeps whole values in memory while it copies them.
const maxValue = 1 << 20

// Node is one running member.
type Node struct {
	cfg   Config
	log   zerolog.Logger
	store *Store
	// epoch names this process: a peer's listing cursor is only good within one epoch.
	epoch  string
	http   *http.Client
	bucket *bucketClient

	mu        sync.Mutex
	addrs     []string
	peers     map[string]*peer
	recovered bool
	ready     bool
	refused   string // why this member will never serve (a bucket another fleet claimed)
	claimed   bool
	bucketOK  time.Time

	clientLn, peerLn net.Listener
	servers          []*http.Server
	gate             sync.RWMutex // held shared by every request, exclusively by Stop
	stopped          bool
	cancel           context.CancelFunc
	done             chan struct{}
}

// peer is what this member knows of another: the keys it holds, valid while its incarnation
// (its disk) stays the same.
type peer struct {
	addr        string
	incarnation string
	epoch       string
	cursor      int
	listings    int
	live        bool
	seen        time.Time
	keys        map[string]struct{}
	// noted holds the copies learned from writes since the last full listing began, which that
	// listing may not show yet.
	noted map[string]struct{}
}

// Start opens the store, listens, and starts serving and catching up.
func Start(cfg Config) (*Node, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	store, err := OpenStore(cfg.DataDir, cfg.FleetUID)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:   cfg,
		log:   cfg.Log,
		store: store,
		epoch: randomID(),
		http:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}},
		peers: map[string]*peer{},
		done:  make(chan struct{}),
	}
	if cfg.Durability == DurabilityBucket {
		n.bucket = &bucketClient{endpoint: cfg.Bucket.Endpoint, name: cfg.Bucket.Name, http: n.http}
	}
	if n.clientLn = cfg.clientListener; n.clientLn == nil {
		if n.clientLn, err = net.Listen("tcp", cfg.ClientAddr); err != nil {
			return nil, err
		}
	}
	if n.peerLn = cfg.peerListener; n.peerLn == nil {
		if n.peerLn, err = net.Listen("tcp", cfg.PeerAddr); err != nil {
			n.clientLn.Close()
			return nil, err
		}
	}
	for _, s := range []struct {
		ln net.Listener
		h  http.Handler
	}{{n.clientLn, n.clientHandler()}, {n.peerLn, n.peerHandler()}} {
		srv := &http.Server{Handler: n.track(s.h), ReadHeaderTimeout: 10 * time.Second}
		n.servers = append(n.servers, srv)
		go func() { _ = srv.Serve(s.ln) }()
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go n.loop(ctx)
	n.log.Info().Str("durability", cfg.Durability).Int("keys", store.Len()).Str("incarnation", store.Incarnation()).
		Str("client", n.clientLn.Addr().String()).Str("peer", n.peerLn.Addr().String()).Msg("started")
	return n, nil
}

// Stop ends the member at once, as a killed process would: nothing is handed over.
func (n *Node) Stop() {
	n.cancel()
	for _, s := range n.servers {
		_ = s.Close()
	}
	n.gate.Lock()
	n.stopped = true
	n.gate.Unlock()
	<-n.done
	n.http.CloseIdleConnections()
}

// ClientAddr and PeerAddr are where the member listens.
func (n *Node) ClientAddr() string { return n.clientLn.Addr().String() }
func (n *Node) PeerAddr() string   { return n.peerLn.Addr().String() }

func (n *Node) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.gate.RLock()
		defer n.gate.RUnlock()
		if n.stopped {
			http.Error(w, "stopping", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("X-Celld-Member", n.cfg.Member)
		h.ServeHTTP(w, r)
	})
}

func (n *Node) loop(ctx context.Context) {
	defer close(n.done)
	t := time.NewTicker(n.cfg.Interval)
	defer t.Stop()
	for {
		if n.cfg.Durability == DurabilityBucket {
			n.bucketRound(ctx)
		} else {
			n.fleetRound(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Ready tells whether the member may be counted on, and if not, why. In fleet durability: it has
// caught up since it started, and every key it holds is on Replicas live members, checked
// against peers asked now, not a round ago, so a member lost a moment ago already counts as lost.
// A peer gets half a second to answer: a probe's default timeout is one.
func (n *Node) Ready(ctx context.Context) (bool, string) {
	n.mu.Lock()
	refused, recovered, addrs, bucketOK := n.refused, n.recovered, n.addrs, n.bucketOK
	n.mu.Unlock()
	switch {
	case refused != "":
		return false, refused
	case !recovered:
		return false, "catching up"
	}
	// A member that cannot store the next value cannot keep the promise for the keys it owns:
	// it says so rather than refuse every write while counted on. It is ready again once its disk
	// has room (it was enlarged, or freed), with no restart.
	if d, err := n.Disk(); err != nil {
		return false, "data disk: " + err.Error()
	} else if d.AvailableBytes < minFree {
		return false, fmt.Sprintf("data disk full: %d bytes available of %d, need %d", d.AvailableBytes, d.TotalBytes, minFree)
	}
	switch {
	case n.bucket != nil && time.Since(bucketOK) > 3*n.cfg.Interval+5*time.Second:
		return false, "bucket unreachable since " + bucketOK.Format(time.RFC3339)
	case n.bucket != nil:
		return true, "ok"
	}
	return n.replicated(n.hello(ctx, addrs, 500*time.Millisecond))
}

// replicated tells whether every key held is on enough live members. A member alone in the
// fleet (discovery names no one else) has nowhere to put a second copy: a fleet of one, or the
// first member of an ordered StatefulSet starting again, which would otherwise wait forever for
// members that start only after it is ready.
func (n *Node) replicated(live map[string]bool) (bool, string) {
	keys, _ := n.store.Since(0)
	n.mu.Lock()
	defer n.mu.Unlock()
	want, under := min(Replicas, max(1, len(n.addrs))), 0
	for _, k := range keys {
		copies := 1
		for name, p := range n.peers {
			if _, ok := p.keys[k]; ok && live[name] {
				copies++
			}
		}
		if copies < want {
			under++
		}
	}
	if under > 0 {
		return false, fmt.Sprintf("%d keys on fewer than %d live members", under, want)
	}
	return true, "ok"
}

// live returns this member and the peers that answered last, by name, with their addresses.
func (n *Node) live() (names []string, addr map[string]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	names = []string{n.cfg.Member}
	addr = map[string]string{}
	for name, p := range n.peers {
		if p.live {
			names = append(names, name)
			addr[name] = p.addr
		}
	}
	return names, addr
}

// replicate stores key on its first Replicas live owners, each told which other member holds it
// too, so both count the copy from the moment they hold it.
func (n *Node) replicate(ctx context.Context, key string, value []byte) error {
	names, addr := n.live()
	if len(names) < Replicas {
		return fmt.Errorf("%d live members, %d needed", len(names), Replicas)
	}
	owners := Owners(key, names, Replicas)
	errs := make([]error, len(owners))
	var wg sync.WaitGroup
	for i, o := range owners {
		partner := owners[(i+1)%len(owners)]
		wg.Go(func() {
			if o == n.cfg.Member {
				errs[i] = n.storeLocal(key, value, partner)
				return
			}
			if errs[i] = n.peerPut(ctx, addr[o], key, value, partner); errs[i] == nil {
				n.noteHolder(o, key)
				return
			}
			n.mu.Lock() // the next writes go to members that answer
			if p := n.peers[o]; p != nil {
				p.live = false
			}
			n.mu.Unlock()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (n *Node) storeLocal(key string, value []byte, partner string) error {
	if err := n.store.Put(key, value); err != nil {
		return err
	}
	n.noteHolder(partner, key)
	return nil
}

func (n *Node) noteHolder(name, key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.peers[name]; p != nil {
		p.keys[key] = struct{}{}
		p.noted[key] = struct{}{}
	}
}

// fleetRound finds the members, learns what each holds, and copies the keys this member owns
// among the live ones and lacks. A round that reached every live member and copied everything
// it should ends catching up.
func (n *Node) fleetRound(ctx context.Context) {
	addrs, err := n.cfg.Discover(ctx)
	complete := err == nil
	n.mu.Lock()
	if complete {
		n.addrs = addrs
	}
	addrs, recovered := n.addrs, n.recovered
	n.mu.Unlock()
	if err != nil {
		n.log.Warn().Err(err).Msg("discovering peers")
	}
	live := n.hello(ctx, addrs, max(n.cfg.Interval, time.Second))
	names, addr := n.live()
	for _, name := range names[1:] {
		if err := n.list(ctx, name, addr[name]); err != nil {
			n.log.Warn().Err(err).Str("peer", name).Msg("listing peer keys")
			complete = false
		}
	}
	need := n.missing(names)
	pulled, err := n.pull(ctx, need)
	if pulled > 0 {
		// A few keys a round are writes seen in a peer's listing before their own copy landed
		// here; catching up, or a member lost, copies many.
		ev := n.log.Debug()
		if pulled >= 10 || !recovered {
			ev = n.log.Info()
		}
		ev.Int("copied", pulled).Int("keys", n.store.Len()).Msg("copied keys from peers")
	}
	if err != nil {
		n.log.Warn().Err(err).Int("missing", len(need)-pulled).Msg("copying keys from peers")
		complete = false
	}
	if ctx.Err() != nil {
		return
	}
	if complete && !recovered {
		n.mu.Lock()
		n.recovered = true
		n.mu.Unlock()
		n.log.Info().Int("keys", n.store.Len()).Int("peers", len(names)-1).Msg("caught up")
	}
	n.noteReadiness(n.replicated(live))
}

// noteReadiness logs when readiness, as the loop sees it, changes.
func (n *Node) noteReadiness(ok bool, why string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.recovered {
		ok, why = false, "catching up"
	}
	if n.refused != "" {
		ok, why = false, n.refused
	}
	if ok != n.ready {
		n.ready = ok
		n.log.Info().Bool("ready", ok).Str("reason", why).Msg("readiness")
	}
}

// missing returns the keys live peers hold that this member owns among the live members and
// lacks, each with a peer to copy it from.
func (n *Node) missing(live []string) map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	need := map[string]string{}
	for _, name := range live[1:] {
		p := n.peers[name]
		if p == nil {
			continue
		}
		for k := range p.keys {
			if _, seen := need[k]; seen || n.store.Has(k) || !owns(n.cfg.Member, k, live, Replicas) {
				continue
			}
			need[k] = p.addr
		}
	}
	return need
}

// pull copies keys from peers, a few at a time.
func (n *Node) pull(ctx context.Context, need map[string]string) (int, error) {
	if len(need) == 0 {
		return 0, nil
	}
	if n.cfg.beforePull != nil {
		if err := n.cfg.beforePull(ctx); err != nil {
			return 0, err
		}
	}
	var (
		mu     sync.Mutex
		pulled int
		errs   []error
		wg     sync.WaitGroup
		slots  = make(chan struct{}, 8)
	)
	for key, addr := range need {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			value, ok, err := n.getBytes(ctx, "http://"+addr+"/peer/v1/keys/"+key, 10*time.Second)
			if err == nil && !ok {
				err = fmt.Errorf("%s: key %s is gone", addr, key)
			}
			if err == nil {
				err = n.store.Put(key, value)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else {
				pulled++
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return pulled, fmt.Errorf("%d keys not copied, first: %w", len(errs), errs[0])
	}
	return pulled, nil
}

func (n *Node) clientHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/keys/{key}", n.handlePut)
	mux.HandleFunc("GET /v1/keys/{key}", n.handleGet)
	mux.HandleFunc("GET /v1/keys", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, Listing{Member: n.cfg.Member, Keys: n.store.Hashes()})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if ok, why := n.Ready(r.Context()); !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /v1/disk", func(w http.ResponseWriter, r *http.Request) {
		d, err := n.Disk()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, d)
	})
	return mux
}

// minFree is the room a member needs to be counted on: two of the largest values (one being
// written, one being copied in from a peer).
const minFree = 2 * maxValue

// Disk is GET /v1/disk: the data folder's filesystem as this process sees it (statfs), so that
// a grown disk can be told from inside the member, where it counts.
type Disk struct {
	Path           string `json:"path"`
	TotalBytes     int64  `json:"totalBytes"`
	FreeBytes      int64  `json:"freeBytes"`
	AvailableBytes int64  `json:"availableBytes"`
}

// Disk reads the data folder's filesystem now.
func (n *Node) Disk() (Disk, error) {
	statfs := n.cfg.statfs
	if statfs == nil {
		statfs = syscall.Statfs
	}
	var s syscall.Statfs_t
	if err := statfs(n.cfg.DataDir, &s); err != nil {
		return Disk{}, fmt.Errorf("statfs %s: %w", n.cfg.DataDir, err)
	}
	bs := int64(s.Bsize)
	return Disk{Path: n.cfg.DataDir, TotalBytes: int64(s.Blocks) * bs, FreeBytes: int64(s.Bfree) * bs, AvailableBytes: int64(s.Bavail) * bs}, nil
}

// Listing is GET /v1/keys: every key the member holds, with its value's hash.
type Listing struct {
	Member string            `json:"member"`
	Keys   map[string]string `json:"keys"`
}

func (n *Node) handlePut(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if !ValidKey(key) {
		http.Error(w, "invalid key: want [A-Za-z0-9][A-Za-z0-9._-]{0,199}", http.StatusBadRequest)
		return
	}
	value, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxValue))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	if n.bucket != nil {
		err = n.putBucket(r.Context(), key, value)
	} else {
		err = n.replicate(r.Context(), key, value)
	}
	if err != nil {
		n.log.Debug().Err(err).Str("key", key).Msg("write not acknowledged")
		http.Error(w, "not stored durably: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (n *Node) handleGet(w http.ResponseWriter, r *http.Request) {
	value, ok, err := n.store.Get(r.PathValue("key"))
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	case !ok:
		http.Error(w, "not found", http.StatusNotFound)
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(value)
	}
}
