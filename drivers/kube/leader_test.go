package kube

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// TestRunLeaderReleasesAfterWork: on shutdown the lease is held until the work (the sync in
// flight) returned, and released then, so a standby takes over at once but never alongside.
func TestRunLeaderReleasesAfterWork(t *testing.T) {
	kube := kubefake.NewClientset()
	holder := func() string {
		l, err := kube.CoordinationV1().Leases("celld-system").Get(context.Background(), "celld-operator", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var heldDuringWork string
	work := func(wctx context.Context) error {
		close(started)
		<-wctx.Done()
		time.Sleep(300 * time.Millisecond) // the sync in flight
		heldDuringWork = holder()
		return nil
	}
	le := LeaderElection{Namespace: "celld-system", Name: "celld-operator", Identity: "replica-a",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 100 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- RunLeader(ctx, kube, le, zerolog.Nop(), work) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("never became the leader")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a shutdown is not an error: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunLeader did not return after shutdown")
	}
	if heldDuringWork != "replica-a" {
		t.Errorf("lease holder while the last sync finished: %q, want replica-a", heldDuringWork)
	}
	if h := holder(); h != "" {
		t.Errorf("lease still held by %q after shutdown", h)
	}
}
