package load

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// WriteConfig is a load run.
type WriteConfig struct {
	// Members are client addresses, host:port. A host name stands for every address it resolves
	// to, looked up again every second, so a headless Service's name follows the fleet.
	Members []string
	// Journal is the file every acknowledged write is appended to.
	Journal string
	// Workers write concurrently; 0 means 4.
	Workers int
	// Rate bounds the writes attempted per second, all workers together; 0 leaves them unbounded.
	Rate float64
	// Prefix starts every key; empty means a random one, so runs never reuse a key.
	Prefix string
	// OnAck, if set, sees every acknowledged write once it is in the journal.
	OnAck func(Record)
}

// WriteStats counts a run's writes.
type WriteStats struct {
	Acked    int
	Failed   int
	ByMember map[string]int
	// LastError is the last refusal or failure, to tell why writes fail.
	LastError string
}

func (s WriteStats) String() string {
	return fmt.Sprintf("acknowledged %d writes, %d not acknowledged, by member %v", s.Acked, s.Failed, s.ByMember)
}

// Write writes unique keys to the members in turn until ctx ends, and returns the counts. It
// fails only when the journal cannot be written: a write the journal may have missed is not one
// the checker could judge.
func Write(ctx context.Context, cfg WriteConfig) (WriteStats, error) {
	stats := WriteStats{ByMember: map[string]int{}}
	if len(cfg.Members) == 0 {
		return stats, fmt.Errorf("no members to write to")
	}
	j, err := openJournal(cfg.Journal)
	if err != nil {
		return stats, err
	}
	defer j.Close()
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Prefix == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		cfg.Prefix = "w" + hex.EncodeToString(b)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	targets := newTargets(ctx, cfg.Members)
	var tokens <-chan time.Time
	if cfg.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate))
		defer t.Stop()
		tokens = t.C
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Workers}}
	defer client.CloseIdleConnections()
	var (
		seq, turn atomic.Int64
		mu        sync.Mutex
		fatal     error
		wg        sync.WaitGroup
	)
	for range cfg.Workers {
		wg.Go(func() {
			for {
				if tokens != nil {
					select {
					case <-ctx.Done():
						return
					case <-tokens:
					}
				}
				if ctx.Err() != nil {
					return
				}
				addr := targets.pick(int(turn.Add(1)))
				key := cfg.Prefix + "-" + strconv.FormatInt(seq.Add(1), 10)
				value := Value(key)
				member, err := put(ctx, client, addr, key, value)
				if err != nil {
					mu.Lock()
					stats.Failed++
					stats.LastError = err.Error()
					mu.Unlock()
					select { // a fleet refusing everything is not to be hammered
					case <-ctx.Done():
					case <-time.After(20 * time.Millisecond):
					}
					continue
				}
				rec := Record{Key: key, SHA256: hash(value), Member: member, Addr: addr, At: time.Now().UTC()}
				if err := j.Append(rec); err != nil {
					mu.Lock()
					fatal = err
					mu.Unlock()
					cancel()
					return
				}
				mu.Lock()
				stats.Acked++
				stats.ByMember[member]++
				mu.Unlock()
				if cfg.OnAck != nil {
					cfg.OnAck(rec)
				}
			}
		})
	}
	wg.Wait()
	return stats, fatal
}

// put returns the name of the member that acknowledged the write.
func put(ctx context.Context, client *http.Client, addr, key string, value []byte) (string, error) {
	if addr == "" {
		return "", fmt.Errorf("no member address resolved")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+addr+"/v1/keys/"+key, bytes.NewReader(value))
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("%s: %s: %s", addr, resp.Status, bytes.TrimSpace(msg))
	}
	member := resp.Header.Get("X-Celld-Member")
	if member == "" {
		member = addr
	}
	return member, nil
}

// targets is the member addresses, kept current for host names.
type targets struct {
	mu    sync.Mutex
	addrs []string
}

func newTargets(ctx context.Context, members []string) *targets {
	t := &targets{addrs: resolve(ctx, members)}
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if a := resolve(ctx, members); len(a) > 0 {
				t.mu.Lock()
				t.addrs = a
				t.mu.Unlock()
			}
		}
	}()
	return t
}

func (t *targets) pick(i int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.addrs) == 0 {
		return ""
	}
	return t.addrs[i%len(t.addrs)]
}

// resolve expands host names to the addresses they resolve to; one that does not resolve is left
// out, an address is kept as it is.
func resolve(ctx context.Context, members []string) []string {
	var out []string
	for _, m := range members {
		host, port, err := net.SplitHostPort(m)
		if err != nil || net.ParseIP(host) != nil {
			out = append(out, m)
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		cancel()
		if err != nil {
			continue
		}
		for _, ip := range ips {
			out = append(out, net.JoinHostPort(ip, port))
		}
	}
	return out
}
