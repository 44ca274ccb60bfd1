package celldstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

const (
	// forgetAfter is how long a member that answers no more is remembered. Its copies count for
	// nothing meanwhile; forgetting only frees memory.
	forgetAfter = time.Minute
	// fullEvery is how many listings of a peer go by between two full ones. A write tells both
	// members it lands on about the other before the other has stored it; if that store failed,
	// the write was refused, but the note stays until a full listing replaces what was noted.
	fullEvery = 30
)

// Hello is GET /peer/v1/hello: who answers on a peer address.
type Hello struct {
	Member      string `json:"member"`
	FleetUID    string `json:"fleetUID"`
	Incarnation string `json:"incarnation"`
	Epoch       string `json:"epoch"`
}

// peerListing is GET /peer/v1/keys: the keys learned since a cursor of the same epoch.
type peerListing struct {
	Hello
	From int      `json:"from"`
	Next int      `json:"next"`
	Keys []string `json:"keys"`
}

func (n *Node) self() Hello {
	return Hello{Member: n.cfg.Member, FleetUID: n.cfg.FleetUID, Incarnation: n.store.Incarnation(), Epoch: n.epoch}
}

func (n *Node) peerHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /peer/v1/hello", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, n.self()) })
	mux.HandleFunc("GET /peer/v1/keys", func(w http.ResponseWriter, r *http.Request) {
		since, _ := strconv.Atoi(r.URL.Query().Get("since"))
		if r.URL.Query().Get("epoch") != n.epoch {
			since = 0
		}
		keys, next := n.store.Since(since)
		if since > next {
			since = 0
		}
		writeJSON(w, peerListing{Hello: n.self(), From: since, Next: next, Keys: keys})
	})
	mux.HandleFunc("PUT /peer/v1/keys/{key}", func(w http.ResponseWriter, r *http.Request) {
		value, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxValue))
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		if err := n.storeLocal(r.PathValue("key"), value, r.Header.Get("X-Celld-Partner")); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /peer/v1/keys/{key}", n.handleGet)
	return mux
}

// hello asks every address who answers there, records what it learns, and returns the names of
// the members that answered. A peer on a new disk keeps its name but loses every copy counted
// for it.
func (n *Node) hello(ctx context.Context, addrs []string, timeout time.Duration) map[string]bool {
	answers := make([]*Hello, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() {
			var h Hello
			if err := n.getJSON(ctx, "http://"+a+"/peer/v1/hello", &h, timeout); err == nil {
				answers[i] = &h
			}
		})
	}
	wg.Wait()
	now := time.Now()
	live := map[string]bool{}
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, h := range answers {
		if h == nil || h.Member == n.cfg.Member || h.Member == "" {
			continue
		}
		if n.cfg.FleetUID != "" && h.FleetUID != n.cfg.FleetUID {
			n.log.Warn().Str("addr", addrs[i]).Str("peerFleetUID", h.FleetUID).Msg("a member of another fleet answers on a peer address; ignored")
			continue
		}
		p := n.peers[h.Member]
		if p == nil {
			p = &peer{keys: map[string]struct{}{}, noted: map[string]struct{}{}}
			n.peers[h.Member] = p
			n.log.Info().Str("peer", h.Member).Str("addr", addrs[i]).Msg("peer joined")
		}
		if p.incarnation != h.Incarnation {
			if p.incarnation != "" {
				n.log.Info().Str("peer", h.Member).Int("copiesLost", len(p.keys)).Msg("peer is on a new disk")
			}
			p.incarnation, p.keys, p.noted, p.cursor = h.Incarnation, map[string]struct{}{}, map[string]struct{}{}, 0
		}
		if p.epoch != h.Epoch {
			p.epoch, p.cursor = h.Epoch, 0
		}
		p.addr, p.seen = addrs[i], now
		live[h.Member] = true
	}
	for name, p := range n.peers {
		if p.live && !live[name] {
			n.log.Info().Str("peer", name).Msg("peer stopped answering")
		}
		p.live = live[name]
		if now.Sub(p.seen) > forgetAfter {
			delete(n.peers, name)
		}
	}
	return live
}

// list learns the keys a peer took since the last listing.
func (n *Node) list(ctx context.Context, name, addr string) error {
	n.mu.Lock()
	p := n.peers[name]
	if p == nil {
		n.mu.Unlock()
		return nil
	}
	if p.listings++; p.listings%fullEvery == 0 {
		p.cursor = 0
	}
	if p.cursor == 0 {
		p.noted = map[string]struct{}{}
	}
	q := url.Values{"epoch": {p.epoch}, "since": {strconv.Itoa(p.cursor)}}
	n.mu.Unlock()
	var l peerListing
	if err := n.getJSON(ctx, "http://"+addr+"/peer/v1/keys?"+q.Encode(), &l, 30*time.Second); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if p = n.peers[name]; p == nil || l.Member != name {
		return nil
	}
	if p.incarnation != l.Incarnation {
		p.incarnation, p.keys, p.noted = l.Incarnation, map[string]struct{}{}, map[string]struct{}{}
	}
	if l.From == 0 {
		// Everything the peer holds, and the writes noted while the listing was on its way.
		p.keys = p.noted
		p.noted = map[string]struct{}{}
	}
	for _, k := range l.Keys {
		p.keys[k] = struct{}{}
	}
	p.epoch, p.cursor = l.Epoch, l.Next
	return nil
}

func (n *Node) peerPut(ctx context.Context, addr, key string, value []byte, partner string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+addr+"/peer/v1/keys/"+key, bytes.NewReader(value))
	if err != nil {
		return err
	}
	req.Header.Set("X-Celld-Partner", partner)
	resp, err := n.http.Do(req)
	if err != nil {
		return err
	}
	defer drain(resp)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", addr, resp.Status)
	}
	return nil
}

func (n *Node) getBytes(ctx context.Context, u string, timeout time.Duration) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := n.http.Do(req)
	if err != nil {
		return nil, false, err
	}
	defer drain(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, false, nil
	case resp.StatusCode/100 != 2:
		return nil, false, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return b, err == nil, err
}

func (n *Node) getJSON(ctx context.Context, u string, v any, timeout time.Duration) error {
	b, ok, err := n.getBytes(ctx, u, timeout)
	if err == nil && !ok {
		err = fmt.Errorf("GET %s: not found", u)
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
