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
	"github.com/celld/celld-operator/render"
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

// TestUtilizationIsCelldsOwn: a member's utilization is celld's usage over celld's request. A
// sidecar, native (an init container that keeps running, as spec.pod.sidecars renders) or a
// container an admission webhook put beside celld, is the user's: its usage neither counts
// toward celld's load nor its request toward celld's capacity, however busy it is.
func TestUtilizationIsCelldsOwn(t *testing.T) {
	now := time.Unix(500, 0)
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	always := corev1.ContainerRestartPolicyAlways
	member := func(name string, sidecars, injected []corev1.Container) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"}}
		p.Spec.InitContainers = sidecars
		p.Spec.Containers = append([]corev1.Container{{Name: render.ContainerName, Resources: corev1.ResourceRequirements{Requests: cpu("500m")}}}, injected...)
		return p
	}
	usage := func(name string, used map[string]string) metricsv1beta1.PodMetrics {
		m := metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"}}
		for _, c := range []string{"shipper", "proxy", render.ContainerName} {
			if q, ok := used[c]; ok {
				m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: c, Usage: cpu(q)})
			}
		}
		return m
	}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		used map[string]string
	}{
		{"a native sidecar", member("a-0", []corev1.Container{{Name: "shipper", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: cpu("50m")}}}, nil),
			map[string]string{render.ContainerName: "250m", "shipper": "900m"}},
		{"a native sidecar without a request", member("a-0", []corev1.Container{{Name: "shipper", RestartPolicy: &always}}, nil),
			map[string]string{render.ContainerName: "250m", "shipper": "900m"}},
		{"a container beside celld", member("a-0", nil, []corev1.Container{{Name: "proxy", Resources: corev1.ResourceRequirements{Requests: cpu("100m")}}}),
			map[string]string{render.ContainerName: "250m", "proxy": "900m"}},
		{"both", member("a-0", []corev1.Container{{Name: "shipper", RestartPolicy: &always}}, []corev1.Container{{Name: "proxy", Resources: corev1.ResourceRequirements{Requests: cpu("100m")}}}),
			map[string]string{render.ContainerName: "250m", "shipper": "700m", "proxy": "900m"}},
	} {
		u, ok := Utilization([]*corev1.Pod{c.pod}, []metricsv1beta1.PodMetrics{usage("a-0", c.used)}, now)
		if !ok || u.Percent != 50 || u.Members != 1 {
			t.Errorf("%s: %+v (ok %t), want celld's 250m of its 500m: 50%% of 1 member", c.name, u, ok)
		}
	}
	// A sample without celld's container is no sample of celld: the member is not counted.
	pods := []*corev1.Pod{member("a-0", nil, nil), member("a-1", []corev1.Container{{Name: "shipper", RestartPolicy: &always}}, nil)}
	u, ok := Utilization(pods, []metricsv1beta1.PodMetrics{usage("a-0", map[string]string{render.ContainerName: "100m"}), usage("a-1", map[string]string{"shipper": "900m"})}, now)
	if !ok || u.Percent != 20 || u.Members != 1 {
		t.Errorf("a member sampled without celld: %+v (ok %t), want 20%% of the 1 member sampled", u, ok)
	}
}
