package kube

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrNotLeading is what a write refused by GuardWrites fails with: the replica does not hold the
// lease (it stands by, or it lost the lease), so the write is never sent.
var ErrNotLeading = errors.New("not the leader: write not sent")

// Leadership says whether this replica may write. A replica leads from the moment it acquired the
// Lease until the first of: the elector gives up renewing, the Lease is seen held by another
// identity, or its last accepted renewal is older than the renew deadline. The last one is the
// bound that needs nobody's cooperation: a standby takes the Lease only after the lease duration
// has passed since the renewal it saw, which is longer than the renew deadline, so writes stop
// before anyone else may start. Once lost it is never regained: the process exits
// (ErrLeadershipLost) and its successor starts with fresh caches.
type Leadership struct {
	namespace, name string
	renewDeadline   time.Duration
	now             func() time.Time

	lost     context.Context
	markLost context.CancelFunc

	mu      sync.Mutex
	elector *leaderelection.LeaderElector
	leading bool
	renewed time.Time // when the last renewal the API server accepted was sent
}

// NewLeadership is the gate of the Lease le describes; RunLeader with le.Leadership set opens it.
func NewLeadership(le LeaderElection) *Leadership {
	l := &Leadership{namespace: le.Namespace, name: le.Name, renewDeadline: le.RenewDeadline, now: time.Now}
	l.lost, l.markLost = context.WithCancel(context.Background())
	return l
}

// Leading reports whether a write may be sent now. A nil Leadership (no leader election) always
// leads.
func (l *Leadership) Leading() bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leading {
		return false
	}
	switch {
	case l.elector != nil && !l.elector.IsLeader():
	case l.now().Sub(l.renewed) >= l.renewDeadline:
	default:
		return true
	}
	l.loseLocked()
	return false
}

// Lost is closed once a replica that led stops leading.
func (l *Leadership) Lost() <-chan struct{} { return l.lost.Done() }

// Bound is ctx, also ended when the lease is lost: a sync on it stops at once, whatever deadline
// it was given for a graceful shutdown.
func (l *Leadership) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if l == nil {
		return ctx, func() { cancel(nil) }
	}
	stop := context.AfterFunc(l.lost, func() { cancel(ErrLeadershipLost) })
	return ctx, func() { stop(); cancel(nil) }
}

// isLease tells the Lease's own requests, which must pass while not leading: they are how a
// replica becomes the leader, renews, and releases.
func (l *Leadership) isLease(path string) bool {
	base := "/apis/coordination.k8s.io/v1/namespaces/" + l.namespace + "/leases"
	return path == base || path == base+"/"+l.name
}

func (l *Leadership) start(elector *leaderelection.LeaderElector) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost.Err() == nil {
		l.elector, l.leading = elector, true
	}
}

func (l *Leadership) lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loseLocked()
}

func (l *Leadership) loseLocked() {
	l.leading = false
	l.markLost()
}

func (l *Leadership) renewedAt(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.After(l.renewed) {
		l.renewed = t
	}
}

// watch notices a loss that no write asked about, so the syncs in flight are cancelled without
// waiting for the elector to give up.
func (l *Leadership) watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.lost.Done():
			return
		case <-t.C:
			l.mu.Lock()
			leading := l.leading
			l.mu.Unlock()
			if leading {
				l.Leading()
			}
		}
	}
}

// renewalClock is the Lease lock, timing every write of it that makes this replica the holder:
// the time taken is when the request was sent, so the deadline counts from before the API server
// saw it.
type renewalClock struct {
	resourcelock.Interface
	l *Leadership
}

func (r *renewalClock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := r.l.now()
	err := r.Interface.Create(ctx, ler)
	if err == nil && ler.HolderIdentity == r.Identity() {
		r.l.renewedAt(sent)
	}
	return err
}

func (r *renewalClock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := r.l.now()
	err := r.Interface.Update(ctx, ler)
	if err == nil && ler.HolderIdentity == r.Identity() {
		r.l.renewedAt(sent)
	}
	return err
}
