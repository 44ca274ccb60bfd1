package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/celld/celld-operator/e2e/testenv"
)

// operator is one celld-operator process the bench started, and stops, by its PID.
type operator struct{ *testenv.Operator }

// startOperator runs the operator binary as its own user against the bench cluster, watching one
// namespace, and waits until its caches synced (/readyz). Later flags override earlier ones.
func (b *bench) startOperator(ctx context.Context, name, namespace string, flags ...string) (*operator, error) {
	var op *operator
	_, err := testenv.Start(ctx, testenv.Options{
		Binary: b.operatorBin, LogPath: filepath.Join(b.cfg.workDir, "logs", name+".log"),
		Ready: 2 * time.Minute, Poll: 100 * time.Millisecond,
		Args: append(append([]string{"--kubeconfig", b.cl.opKubeconfig, "--namespace", namespace, "--pprof"}, b.cfg.operatorFlags...), flags...),
	}, func(o *testenv.Operator) {
		op = &operator{o}
		b.running(op)
	})
	if err != nil {
		return nil, fmt.Errorf("operator %s: %w", name, err)
	}
	return op, nil
}

// phase is what a measured phase runs in: its operator, the bench's watches of its namespace
// (Pods too when withPods), and the finish line of its fleets converged.
type phase struct {
	op *operator
	w  *watchers
	fl *finishLine
}

func (b *bench) startPhase(ctx context.Context, name, ns string, withPods bool, flags ...string) (*phase, error) {
	op, err := b.startOperator(ctx, name, ns, flags...)
	if err != nil {
		return nil, err
	}
	w, err := b.watch(ctx, ns, withPods)
	if err != nil {
		op.stop()
		return nil, err
	}
	fl, err := newFinishLine(w.fleets, fleetConverged)
	if err != nil {
		w.close()
		op.stop()
		return nil, err
	}
	return &phase{op: op, w: w, fl: fl}, nil
}

// close stops the watches, then the operator.
func (ph *phase) close() {
	ph.w.close()
	ph.op.stop()
}

// stop sends SIGTERM to the operator's own PID and waits; SIGKILL after 30 s.
func (op *operator) stop() { _ = op.Stop() }

func (op *operator) get(path string) ([]byte, error) { return op.Get(path) }

func (op *operator) scrape() (families, error) {
	ms, err := op.Scrape()
	if err != nil {
		return nil, err
	}
	return fromMetrics(ms), nil
}

func (op *operator) writes() (float64, map[string]float64, error) {
	f, err := op.scrape()
	if err != nil {
		return 0, nil, err
	}
	return f.value("celld_operator_api_writes_total"), f.series("celld_operator_api_writes_total"), nil
}

// memory forces a garbage collection through the profiler's heap endpoint (?gc=1), so the heap
// figure is what is live rather than what the collector has not reached yet, then reads the
// runtime's and the process's figures from /metrics.
func (op *operator) memory() (memSample, error) {
	if _, err := op.get("/debug/pprof/heap?gc=1"); err != nil {
		return memSample{}, err
	}
	f, err := op.scrape()
	if err != nil {
		return memSample{}, err
	}
	return memSample{
		heapInuse: f.value("go_memstats_heap_inuse_bytes"),
		heapAlloc: f.value("go_memstats_heap_alloc_bytes"),
		rss:       f.value("process_resident_memory_bytes"),
	}, nil
}

type memSample struct{ heapInuse, heapAlloc, rss float64 }

// logSpan is the part of an operator log written during a measured window.
type logSpan struct {
	path     string
	from, to int64
}

var (
	uidRe  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	nsRe   = regexp.MustCompile(`bench-[a-z0-9]+-[0-9a-f]{6}`)
	nameRe = regexp.MustCompile(`\b(f|lc)[0-9]{3,4}\b`)
)

// failures counts the operator's failed actions in the spans by action and error message, with
// names, namespaces and UIDs blanked so the same failure of different fleets counts as one.
func failures(spans []logSpan) map[string]float64 {
	out := map[string]float64{}
	for _, sp := range spans {
		sp.eachLine(func(line []byte) {
			if !bytes.Contains(line, []byte(`"action failed; requeued"`)) {
				return
			}
			var e struct{ Action, Error string }
			if json.Unmarshal(line, &e) != nil {
				return
			}
			msg := nameRe.ReplaceAllString(nsRe.ReplaceAllString(uidRe.ReplaceAllString(e.Error, "UID"), "NS"), "FLEET")
			if len(msg) > 200 {
				msg = msg[:200] + "..."
			}
			out[e.Action+": "+msg]++
		})
	}
	return out
}

// eachLine calls f with every line of the span (the slice is f's only until it returns); a log
// that cannot be read has none.
func (sp logSpan) eachLine(f func(line []byte)) {
	file, err := os.Open(sp.path)
	if err != nil {
		return
	}
	defer file.Close()
	sc := bufio.NewScanner(io.NewSectionReader(file, sp.from, max(sp.to-sp.from, 0)))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		f(sc.Bytes())
	}
}

// profiler takes back-to-back CPU profiles of 5 s from /debug/pprof/profile until stopped: one
// long profile would need its length known in advance, and a run lasts as long as it lasts.
type profiler struct {
	stop  chan struct{}
	done  chan struct{}
	files []string
	err   error
}

func (op *operator) profile(dir, prefix string) *profiler {
	p := &profiler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			case <-op.Exited:
				return
			default:
			}
			body, err := op.get("/debug/pprof/profile?seconds=5")
			if err != nil {
				p.err = err
				return
			}
			file := filepath.Join(dir, fmt.Sprintf("%s-%03d.pprof", prefix, i))
			if err := os.WriteFile(file, body, 0o644); err != nil {
				p.err = err
				return
			}
			p.files = append(p.files, file)
		}
	}()
	return p
}

// finish waits for the profile in flight (at most 5 s) and returns the files.
func (p *profiler) finish() ([]string, error) {
	close(p.stop)
	<-p.done
	return p.files, p.err
}

// movingUnlimited reads from the operator's log whether it runs the client that moves fleets
// without a client-side limit (--moving-client-limit auto on a server with priority and fairness,
// said once at start): the notes then reason about the server's latency, not a token bucket.
func (op *operator) movingUnlimited() bool {
	b, err := os.ReadFile(op.LogPath)
	return err == nil && bytes.Contains(b, []byte(movingUnlimitedLog))
}

// movingUnlimitedLog is what cmd/celld-operator logs when the client that moves fleets has no limit.
const movingUnlimitedLog = "no client-side limit on the writes that move fleets"
