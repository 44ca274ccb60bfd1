package render

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// Kubernetes' probe defaults, which a fleet's spec.readiness replaces field by field.
const (
	ReadinessPeriodSeconds    int32 = 10
	ReadinessFailureThreshold int32 = 3
	ReadinessTimeoutSeconds   int32 = 1
)

// readinessProbe asks celld's /readyz. celld answers ready only once a restarted member has
// recovered, so Ready means the member counts toward the copies celld needs.
//
// Without spec.readiness the probe carries no timing, and Kubernetes' defaults apply (a member
// that stops answering counts as away within about 30s): the template of every fleet that sets
// nothing stays what it was, so an operator upgrade restarts no member. The shorter default a new
// fleet gets, for the disruption budget a drain obeys, is written into its spec at creation by
// the install's admission policy (deploy/rbac/readiness_default.yaml, docs/node-maintenance.md).
func readinessProbe(f *v1alpha1.CelldFleet) *corev1.Probe {
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString(clientPortName)},
	}}
	if r := f.Spec.Readiness; r != nil {
		p.PeriodSeconds = ptr.Deref(r.PeriodSeconds, ReadinessPeriodSeconds)
		p.FailureThreshold = ptr.Deref(r.FailureThreshold, ReadinessFailureThreshold)
		p.TimeoutSeconds = ptr.Deref(r.TimeoutSeconds, ReadinessTimeoutSeconds)
		p.SuccessThreshold = 1
	}
	return p
}

// ReadinessWindow is the longest a member whose celld stopped answering ready is still counted
// Ready: failureThreshold probes a period apart, the last given its timeout.
func ReadinessWindow(p *corev1.Probe) int32 {
	period, failures, timeout := p.PeriodSeconds, p.FailureThreshold, p.TimeoutSeconds
	if period == 0 {
		period = ReadinessPeriodSeconds
	}
	if failures == 0 {
		failures = ReadinessFailureThreshold
	}
	if timeout == 0 {
		timeout = ReadinessTimeoutSeconds
	}
	return period*failures + timeout
}
