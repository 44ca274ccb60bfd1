package render

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// The readiness probe's defaults. The disruption budget counts only Ready members, so a member
// whose celld stopped answering ready but that Kubernetes still counts Ready lets a drain evict a
// second member. Kubernetes' own defaults (every 10s, three failures) leave that window open for
// about 30s; these close it within about 4s (three probes a second apart, each given a second),
// shorter than the 5s kubectl drain waits before it retries an eviction the budget refused, while
// one or two answers missed under load still do not take a member away.
const (
	ReadinessPeriodSeconds    int32 = 1
	ReadinessFailureThreshold int32 = 3
	ReadinessTimeoutSeconds   int32 = 1
)

// readinessProbe asks celld's /readyz, timed by spec.readiness where the fleet sets it. celld
// answers ready only once a restarted member has recovered, so Ready means the member counts
// toward the copies celld needs.
func readinessProbe(f *v1alpha1.CelldFleet) *corev1.Probe {
	period, failures, timeout := ReadinessPeriodSeconds, ReadinessFailureThreshold, ReadinessTimeoutSeconds
	if r := f.Spec.Readiness; r != nil {
		period = ptr.Deref(r.PeriodSeconds, period)
		failures = ptr.Deref(r.FailureThreshold, failures)
		timeout = ptr.Deref(r.TimeoutSeconds, timeout)
	}
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString(clientPortName)},
		},
		PeriodSeconds:    period,
		FailureThreshold: failures,
		TimeoutSeconds:   timeout,
		SuccessThreshold: 1,
	}
}
