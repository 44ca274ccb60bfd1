package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderElection configures the Lease that makes one replica the one that works.
type LeaderElection struct {
	Namespace, Name, Identity string
	LeaseDuration             time.Duration
	RenewDeadline             time.Duration
	RetryPeriod               time.Duration
	// Watchdog, when set, fails the liveness check of a leader that stopped renewing.
	Watchdog *leaderelection.HealthzAdaptor
	// Leadership, when set, is opened while this replica leads and closed for good when it stops:
	// GuardWrites and the syncs' contexts follow it.
	Leadership *Leadership
}

// ErrLeadershipLost is returned when the lease was lost while the operator was not shutting
// down. The process must exit: its caches and machines may be behind the new leader's writes.
var ErrLeadershipLost = errors.New("leader election lost")

// RunLeader runs work while this replica holds the lease, until ctx ends. On shutdown it lets
// work return (the sync in flight finishes) before it releases the lease, so the next leader
// never works alongside it.
func RunLeader(ctx context.Context, client kubernetes.Interface, le LeaderElection, log zerolog.Logger, work func(context.Context) error) error {
	var lock resourcelock.Interface = &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	lead := le.Leadership
	if lead != nil {
		lock = &renewalClock{Interface: lock, l: lead}
		defer lead.lose()
	}
	// The election runs on a context of its own, ended only once work returned: ending it releases
	// the lease.
	electCtx, endElection := context.WithCancel(context.WithoutCancel(ctx))
	defer endElection()

	var (
		mu       sync.Mutex
		stopping bool
		working  sync.WaitGroup
		workErr  error
		lost     bool
	)
	go func() {
		<-ctx.Done()
		mu.Lock()
		stopping = true
		mu.Unlock()
		working.Wait()
		endElection()
	}()

	var elector *leaderelection.LeaderElector
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            le.Name,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        le.Watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				mu.Lock()
				if stopping {
					mu.Unlock()
					return
				}
				working.Add(1)
				mu.Unlock()
				defer working.Done()
				log.Info().Str("lease", le.Namespace+"/"+le.Name).Str("identity", le.Identity).Msg("became the leader")
				// Work stops when the operator shuts down or the lease is lost, whichever is first.
				wctx, cancel := context.WithCancel(ctx)
				defer cancel()
				var lost <-chan struct{}
				if lead != nil {
					lead.start(elector)
					lost = lead.Lost()
					go lead.watch(wctx, watchEvery(le.RetryPeriod))
				}
				go func() {
					select {
					case <-leading.Done():
						cancel()
					case <-lost:
						log.Error().Str("lease", le.Namespace+"/"+le.Name).Str("identity", le.Identity).
							Msg("leadership lost: the syncs in flight are cancelled and no write is sent any more")
						cancel()
					case <-wctx.Done():
					}
				}()
				if err := work(wctx); err != nil {
					mu.Lock()
					workErr = err
					mu.Unlock()
					endElection()
				}
				if lead != nil && lead.lost.Err() != nil {
					// The elector may still renew (the gate closed on the renew deadline, and the API
					// server answered late): a replica that will not work must not hold the lease.
					endElection()
				}
			},
			OnStoppedLeading: func() {
				if lead != nil {
					lead.lose()
				}
				mu.Lock()
				defer mu.Unlock()
				if !stopping && workErr == nil {
					lost = true
				}
			},
			OnNewLeader: func(id string) {
				if id != le.Identity {
					log.Info().Str("leader", id).Msg("standing by: another replica leads")
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	if le.Watchdog != nil {
		le.Watchdog.SetLeaderElection(elector)
	}
	log.Info().Str("lease", le.Namespace+"/"+le.Name).Str("identity", le.Identity).Msg("waiting to lead")
	elector.Run(electCtx)
	// Run returns once the lease was released or lost; a work goroutine may still be finishing.
	working.Wait()
	mu.Lock()
	defer mu.Unlock()
	if lead != nil && ctx.Err() == nil && lead.lost.Err() != nil {
		// The gate closed before the elector gave up (the Lease seen held by another, or the renew
		// deadline passed): a loss all the same.
		lost = true
	}
	switch {
	case workErr != nil:
		return workErr
	case lost && ctx.Err() == nil:
		return ErrLeadershipLost
	}
	return nil
}

// watchEvery is how often a leader checks it still leads between writes: a fraction of the retry
// period, so a loss cancels the syncs well within the margin between renew deadline and lease
// duration.
func watchEvery(retry time.Duration) time.Duration {
	return min(max(retry/4, 20*time.Millisecond), 250*time.Millisecond)
}
