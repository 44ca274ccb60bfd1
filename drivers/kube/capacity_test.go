package kube

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	clienttesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// metricsDiscovery answers discovery of the metrics API with err, or with the resources given.
type metricsDiscovery struct {
	discovery.DiscoveryInterface
	resources []metav1.APIResource
	err       error
}

func (d *metricsDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if d.err != nil {
		return nil, d.err
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: d.resources}, nil
}

// TestSamplerObservesNothingUnlessTheMetricsAPIAnswers: a metrics API that is not served, does not
// answer (an aggregated API server that is down answers 503) or has no usage for the members
// replaces the last sample with one that observed nothing, saying why: a stale sample must not
// go on deciding.
func TestSamplerObservesNothingUnlessTheMetricsAPIAnswers(t *testing.T) {
	fl := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "team", UID: "uid-a"},
		Spec: v1alpha1.CelldFleetSpec{Capacity: v1alpha1.CapacitySpec{Mode: v1alpha1.CapacityAuto}}}
	pod := memberPod(fl, "a-0", "n1")
	pod.Spec.Containers = []corev1.Container{{Name: "celld", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}
	usage := metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: "a-0", Namespace: "team", Labels: pod.Labels},
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "celld", Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("40m")}}}}
	served := []metav1.APIResource{{Name: "nodes"}, {Name: "pods"}}
	down := apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	notServed := apierrors.NewNotFound(schema.GroupResource{Group: "metrics.k8s.io"}, "v1beta1")

	cases := []struct {
		name    string
		disc    *metricsDiscovery
		samples []metricsv1beta1.PodMetrics
		listErr error
		want    events.Utilization
	}{
		{"observed", &metricsDiscovery{resources: served}, []metricsv1beta1.PodMetrics{usage}, nil, events.Utilization{Percent: 40, Members: 1}},
		{"metrics API down", &metricsDiscovery{err: down}, []metricsv1beta1.PodMetrics{usage}, nil, events.Utilization{Unavailable: true, Why: WhyMetricsNotAnswering}},
		{"metrics API not served", &metricsDiscovery{err: notServed}, nil, nil, events.Utilization{Unavailable: true}},
		{"served without pods", &metricsDiscovery{resources: served[:1]}, nil, nil, events.Utilization{Unavailable: true}},
		{"list fails", &metricsDiscovery{resources: served}, nil, down, events.Utilization{Unavailable: true, Why: WhyMetricsNotAnswering}},
		{"no usage for the members", &metricsDiscovery{resources: served}, nil, nil, events.Utilization{Unavailable: true, Why: WhyNoUsage}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			metrics := metricsfake.NewSimpleClientset()
			metrics.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, &metricsv1beta1.PodMetricsList{Items: c.samples}, c.listErr
			})
			enqueued := 0
			s := &sampler{metrics: metrics, discovery: c.disc, inf: testInformers(t, fl, pod), util: newUtilizations(),
				enqueue: func(events.FleetKey) { enqueued++ }, log: zerolog.Nop(), counts: NewMetrics().utilizationGet, gauges: NewMetrics().capacity}
			// The last sample observed usage: what follows must replace it.
			s.util.set(key("team", "a"), events.Utilization{Percent: 90, Members: 1})
			now := time.Unix(1000, 0)
			s.sampleAll(context.Background(), now)
			got := s.util.get(key("team", "a"))
			c.want.Time = now
			if got == nil || *got != c.want {
				t.Fatalf("sample: got %+v, want %+v", got, c.want)
			}
			if enqueued != 1 {
				t.Errorf("the fleet was enqueued %d times for a changed sample, want 1", enqueued)
			}
		})
	}
}
