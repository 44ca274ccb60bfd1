package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
	celldscheme "github.com/celld/celld-operator/api/generated/clientset/versioned/scheme"
	"github.com/celld/celld-operator/loop"
)

// NewClients builds every client from one config, and an event recorder whose broadcaster the
// returned stop function flushes and ends.
//
// The operator's writes are of three kinds, and each kind has a client-side limiter of its own of
// cfg.QPS and cfg.Burst (cfg.RateLimiter is not used), so one kind never waits behind another's
// queue:
//   - moving: the Kubernetes and the celld.io clientsets (Kube, Celld), which share one limiter
//     since both move fleets: the informers, the applies, the deletes, the finalizers, the
//     reservations' creation and the fresh reads a premise makes;
//   - status: Status, a celld.io clientset for the fleets' status and the reservations' capacity
//     history alone;
//   - events: the Kubernetes client behind the Recorder's broadcaster.
//
// A status write or an Event therefore never delays a StatefulSet apply or a member's delete.
// The metadata and metrics clients keep a limiter each, as they always had.
//
// With limits.MovingUnlimited the client that moves fleets has no client-side limiter: the API
// server's priority and fairness queues its requests in the operator's own priority level, and a
// token bucket in front of it would only make a fleet's step wait.
func NewClients(cfg *rest.Config, limits ClientLimits) (Clients, func(), error) {
	moving := limited(cfg)
	if limits.MovingUnlimited {
		moving = rest.CopyConfig(cfg)
		moving.QPS, moving.RateLimiter = -1, nil
	}
	kube, err := kubernetes.NewForConfig(moving)
	if err != nil {
		return Clients{}, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	celld, err := versioned.NewForConfig(moving)
	if err != nil {
		return Clients{}, nil, fmt.Errorf("celld client: %w", err)
	}
	status, err := versioned.NewForConfig(limited(cfg))
	if err != nil {
		return Clients{}, nil, fmt.Errorf("celld status client: %w", err)
	}
	events, err := typedcorev1.NewForConfig(limited(cfg))
	if err != nil {
		return Clients{}, nil, fmt.Errorf("events client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return Clients{}, nil, fmt.Errorf("metadata client: %w", err)
	}
	metrics, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return Clients{}, nil, fmt.Errorf("metrics client: %w", err)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.Events("")})
	rec := b.NewRecorder(celldscheme.Scheme, corev1.EventSource{Component: FieldManager})
	return Clients{Kube: kube, Celld: celld, Status: status, Metadata: meta, Metrics: metrics, Discovery: kube.Discovery(), Recorder: rec},
		b.Shutdown, nil
}

// limited is a copy of cfg with a token bucket of its own, of cfg.QPS and cfg.Burst (client-go's
// defaults where unset). A negative QPS is no limit at all, as in client-go.
func limited(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.RateLimiter = nil
	if c.QPS < 0 {
		return c
	}
	qps, burst := c.QPS, c.Burst
	if qps == 0 {
		qps = rest.DefaultQPS
	}
	if burst <= 0 {
		burst = rest.DefaultBurst
	}
	c.RateLimiter = tracedLimiter{flowcontrol.NewTokenBucketRateLimiter(qps, burst)}
	return c
}

// tracedLimiter adds each wait to the trace of the sync that waited (loop.Trace), so that a slow
// step's log line says how much of it was spent at this limiter.
type tracedLimiter struct{ flowcontrol.RateLimiter }

func (l tracedLimiter) Wait(ctx context.Context) error {
	start := time.Now()
	err := l.RateLimiter.Wait(ctx)
	loop.TraceFrom(ctx).Limited(time.Since(start))
	return err
}

// ClientLimits says which of the operator's clients go without a client-side limiter.
type ClientLimits struct {
	// MovingUnlimited: the client that moves fleets (and reads their premises) has none.
	MovingUnlimited bool
}
