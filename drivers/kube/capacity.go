package kube

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/render"
)

// utilizations hold the latest sample of each fleet's member usage, for the next sync to read.
type utilizations struct {
	mu     sync.Mutex
	latest map[events.FleetKey]events.Utilization
}

func newUtilizations() *utilizations {
	return &utilizations{latest: map[events.FleetKey]events.Utilization{}}
}

func (u *utilizations) get(key events.FleetKey) *events.Utilization {
	u.mu.Lock()
	defer u.mu.Unlock()
	if x, ok := u.latest[key]; ok {
		return &x
	}
	return nil
}

// set stores a sample and reports whether it says something new. The sample time alone is not
// news: the machine decides on the figures, and a fleet at the same usage needs no sync.
func (u *utilizations) set(key events.FleetKey, x events.Utilization) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	old, ok := u.latest[key]
	u.latest[key] = x
	return !ok || old.Percent != x.Percent || old.Members != x.Members || old.Unavailable != x.Unavailable || old.Why != x.Why
}

func (u *utilizations) drop(key events.FleetKey) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.latest, key)
}

// keepOnly forgets the fleets no longer sampled.
func (u *utilizations) keepOnly(keys map[events.FleetKey]bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	maps.DeleteFunc(u.latest, func(k events.FleetKey, _ events.Utilization) bool { return !keys[k] })
}

// metricsGroupVersion is the resource metrics API (metrics-server and its alternatives).
const metricsGroupVersion = "metrics.k8s.io/v1beta1"

// sampler reads the members' usage from the metrics API for the fleets whose capacity mode asks
// for a recommendation, and enqueues a fleet when its figures change.
type sampler struct {
	metrics   metricsclient.Interface
	discovery discovery.DiscoveryInterface
	inf       *Informers
	util      *utilizations
	enqueue   func(key events.FleetKey)
	log       zerolog.Logger
	counts    *prometheus.CounterVec
	gauges    *capacityGauges
}

func (s *sampler) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.sampleAll(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func sampled(f *v1alpha1.CelldFleet) bool {
	m := f.Spec.Capacity.Mode
	return f.DeletionTimestamp == nil && (m == v1alpha1.CapacityRecommend || m == v1alpha1.CapacityAuto)
}

func (s *sampler) sampleAll(ctx context.Context, now time.Time) {
	fleets, err := s.inf.fleetLister.List(labels.Everything())
	if err != nil {
		return
	}
	keep := map[events.FleetKey]bool{}
	for _, f := range fleets {
		if sampled(f) {
			keep[events.KeyOf(f)] = true
		}
	}
	s.util.keepOnly(keep)
	if len(keep) == 0 {
		return
	}
	// A metrics API that does not answer (an aggregated API server that is down answers 503)
	// leaves nothing observed: the last sample must not go on deciding.
	available, err := s.available()
	if err != nil {
		s.counts.WithLabelValues("error").Inc()
		s.log.Warn().Err(err).Msg("the metrics API (metrics.k8s.io) does not answer: capacity is not observed")
	}
	for _, f := range fleets {
		key := events.KeyOf(f)
		if !keep[key] {
			continue
		}
		var u events.Utilization
		switch {
		case err != nil:
			u = unobserved(now, WhyMetricsNotAnswering)
		case !available:
			s.counts.WithLabelValues("unavailable").Inc()
			u = unobserved(now, "")
		default:
			var ok bool
			var serr error
			u, ok, serr = s.sample(ctx, f, now)
			switch {
			case serr != nil:
				s.counts.WithLabelValues("error").Inc()
				s.log.Warn().Err(serr).Str("namespace", f.Namespace).Str("fleet", f.Name).Msg("read member usage")
				u = unobserved(now, WhyMetricsNotAnswering)
			case !ok:
				s.counts.WithLabelValues("empty").Inc()
				u = unobserved(now, WhyNoUsage)
			default:
				s.counts.WithLabelValues("ok").Inc()
			}
		}
		s.gauges.sampled(f, u)
		if s.util.set(key, u) {
			if u.Unavailable {
				s.log.Warn().Str("namespace", f.Namespace).Str("fleet", f.Name).Str("why", orText(u.Why, WhyNoMetricsAPI)).
					Msg("capacity is not observed: the fleet keeps its size")
			}
			s.enqueue(key)
		}
	}
}

// Why capacity is not observed, as the CapacityObserved condition says it.
const (
	WhyNoMetricsAPI        = "the cluster serves no metrics API (metrics.k8s.io)"
	WhyMetricsNotAnswering = "the metrics API (metrics.k8s.io) does not answer: is metrics-server running?"
	WhyNoUsage             = "the metrics API has no usage for the fleet's members"
)

func unobserved(now time.Time, why string) events.Utilization {
	return events.Utilization{Time: now, Unavailable: true, Why: why}
}

func orText(s, alt string) string {
	if s != "" {
		return s
	}
	return alt
}

// available asks discovery whether the metrics API is served: its absence is a fact to report
// once, not an error to retry.
func (s *sampler) available() (bool, error) {
	if s.metrics == nil || s.discovery == nil {
		return false, nil
	}
	list, err := s.discovery.ServerResourcesForGroupVersion(metricsGroupVersion)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == "pods" {
			return true, nil
		}
	}
	return false, nil
}

func (s *sampler) sample(ctx context.Context, f *v1alpha1.CelldFleet, now time.Time) (events.Utilization, bool, error) {
	sel := labels.SelectorFromSet(render.SelectorLabels(f)).String()
	list, err := s.metrics.MetricsV1beta1().PodMetricses(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return events.Utilization{}, false, err
	}
	pods := events.ByIndex[*corev1.Pod](s.inf.Pods.GetIndexer(), events.IndexFleetUID, string(f.UID))
	u, ok := Utilization(pods, list.Items, now)
	return u, ok, nil
}

// Utilization is celld's CPU usage in percent of its CPU request, summed over the members whose
// celld container has both a sample and a request. ok is false when none has. Only celld's own
// container counts, on both sides: a sidecar (a native one among the init containers, or one an
// admission webhook added beside celld) is the user's, and its usage says nothing of how loaded
// celld is. Summing every container's usage over celld's request alone would grow an Auto fleet
// for a busy log shipper.
func Utilization(pods []*corev1.Pod, samples []metricsv1beta1.PodMetrics, now time.Time) (events.Utilization, bool) {
	requests := map[string]int64{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Spec.Containers {
			if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok && c.Name == render.ContainerName && q.MilliValue() > 0 {
				requests[p.Namespace+"/"+p.Name] = q.MilliValue()
			}
		}
	}
	var used, requested int64
	var members int32
	for _, s := range samples {
		req, ok := requests[s.Namespace+"/"+s.Name]
		if !ok {
			continue
		}
		i := slices.IndexFunc(s.Containers, func(c metricsv1beta1.ContainerMetrics) bool { return c.Name == render.ContainerName })
		if i < 0 {
			continue
		}
		q, ok := s.Containers[i].Usage[corev1.ResourceCPU]
		if !ok {
			continue
		}
		used += q.MilliValue()
		requested += req
		members++
	}
	if members == 0 || requested == 0 {
		return events.Utilization{}, false
	}
	return events.Utilization{Time: now, Percent: int32((used*100 + requested/2) / requested), Members: members}, true
}
