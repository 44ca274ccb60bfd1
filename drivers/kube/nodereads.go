package kube

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// nodeReadsKept is how long a finished node read is held for the syncs that may share it,
// nodeReadsHeld how many nodes' reads are held at most (past it, every read is forgotten), and
// nodeReadsSweep how often the reads held are looked over for old ones.
const (
	nodeReadsKept  = time.Minute
	nodeReadsHeld  = 512
	nodeReadsSweep = 10 * time.Second
)

// nodeReads shares the premises' fresh node reads between syncs. The fencing and the readiness
// premises trust a node read only when it was made after the decision: a read another sync sent
// after this sync's decision is as fresh for it as a read of its own, so it waits for that one (or
// takes its answer) instead of sending the same GET again. Of fifty fleets stepping at once on the
// same twenty nodes, every sync that decided before a node's GET went out shares it, instead of
// one GET per fleet and node.
//
// A read sent at or before the decision is never shared, nor a read that failed (but for
// NotFound: the node is gone, an answer like any other). The nodes handed out are shared between
// the syncs: read-only.
type nodeReads struct {
	mu sync.Mutex
	// reads is the latest read sent of each node, by name.
	reads map[string]*nodeRead
	swept time.Time
}

// nodeRead is one GET of a node. node, err and failed are written by its sender only, before
// done is closed; waited under nodeReads.mu.
type nodeRead struct {
	sent time.Time
	done chan struct{}
	node *corev1.Node
	err  error
	// failed: err is not NotFound. The read answered nothing about the node: its error stays its
	// sender's.
	failed bool
	// waited counts the other callers that took its answer or waited for it.
	waited int
}

func newNodeReads() *nodeReads { return &nodeReads{reads: map[string]*nodeRead{}} }

// get is the node as read by a GET sent strictly after decided: another caller's, still in flight
// or answered, or one it sends. A zero decided shares no read sent before the call. The error is
// the API server's (NotFound when the node is gone), or ctx's when ctx ends while it waits for
// another caller's read.
func (r *nodeReads) get(ctx context.Context, c kubernetes.Interface, name string, decided time.Time) (*corev1.Node, error) {
	if decided.IsZero() {
		decided = time.Now()
	}
	for {
		r.mu.Lock()
		rd := r.reads[name]
		if rd == nil || !rd.sent.After(decided) {
			break // still holding the lock: send one
		}
		rd.waited++
		r.mu.Unlock()
		select {
		case <-rd.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !rd.failed {
			return rd.node, rd.err
		}
		// Its sender keeps its error: look again, and send one unless another caller did since.
	}
	now := time.Now()
	r.forget(now)
	rd := &nodeRead{sent: now, done: make(chan struct{})}
	r.reads[name] = rd
	r.mu.Unlock()

	// The request leaves after sent: a caller decided before sent may share it.
	defer close(rd.done)
	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		n = nil
	}
	rd.node, rd.err = n, err
	if err != nil && !apierrors.IsNotFound(err) {
		rd.failed = true
		r.mu.Lock()
		if r.reads[name] == rd {
			delete(r.reads, name)
		}
		r.mu.Unlock()
	}
	return n, err
}

// forget drops the reads too old to serve a sync still running, and every read once too many
// nodes are held. A caller waiting for a read it dropped still gets its answer. r.mu is held.
func (r *nodeReads) forget(now time.Time) {
	if now.Sub(r.swept) < nodeReadsSweep && len(r.reads) < nodeReadsHeld {
		return
	}
	r.swept = now
	for name, rd := range r.reads {
		select {
		case <-rd.done:
			if now.Sub(rd.sent) > nodeReadsKept {
				delete(r.reads, name)
			}
		default:
		}
	}
	if len(r.reads) >= nodeReadsHeld {
		clear(r.reads)
	}
}

// held counts the nodes whose latest read is held.
func (r *nodeReads) held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reads)
}
