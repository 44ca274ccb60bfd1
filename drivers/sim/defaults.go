package sim

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The API server's defaulting (pkg/apis/*/v1/defaults.go and the declarative defaults) of the
// fields the operator's objects carry. It matters because an operator that compares what it
// renders with what it reads back sees these fields it never set: the simulator must show
// them, or it would hide a drift loop a real cluster has. Not modelled: defaults of fields an
// operator here does not render (ephemeral containers, host ports, image volumes, ...).

func (c *Cluster) defaultObject(obj object) {
	if c.opts.NoDefaults {
		return
	}
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		defaultStatefulSet(o)
	case *appsv1.Deployment:
		defaultDeployment(o)
	case *corev1.Service:
		defaultService(o)
	case *networkingv1.NetworkPolicy:
		defaultNetworkPolicy(o)
	}
}

func defaultStatefulSet(s *appsv1.StatefulSet) {
	if s.Spec.Replicas == nil {
		s.Spec.Replicas = ptr(int32(1))
	}
	if s.Spec.PodManagementPolicy == "" {
		s.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	// Only an absent strategy type gets a rollingUpdate block: type RollingUpdate alone keeps a
	// nil one, which changes what revision a recreated Pod gets.
	if s.Spec.UpdateStrategy.Type == "" {
		s.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if s.Spec.UpdateStrategy.RollingUpdate == nil {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	if ru := s.Spec.UpdateStrategy.RollingUpdate; s.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ru != nil {
		if ru.Partition == nil {
			ru.Partition = ptr(int32(0))
		}
		if ru.MaxUnavailable == nil {
			one := intstr.FromInt32(1)
			ru.MaxUnavailable = &one
		}
	}
	if s.Spec.PersistentVolumeClaimRetentionPolicy == nil {
		s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	rp := s.Spec.PersistentVolumeClaimRetentionPolicy
	if rp.WhenDeleted == "" {
		rp.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if rp.WhenScaled == "" {
		rp.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if s.Spec.RevisionHistoryLimit == nil {
		s.Spec.RevisionHistoryLimit = ptr(int32(10))
	}
	defaultPodSpec(&s.Spec.Template.Spec)
	for i := range s.Spec.VolumeClaimTemplates {
		t := &s.Spec.VolumeClaimTemplates[i]
		if t.Spec.VolumeMode == nil {
			mode := corev1.PersistentVolumeFilesystem
			t.Spec.VolumeMode = &mode
		}
		if t.Status.Phase == "" {
			t.Status.Phase = corev1.ClaimPending
		}
	}
}

func defaultDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr(int32(1))
	}
	if d.Spec.Strategy.Type == "" {
		d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if d.Spec.Strategy.RollingUpdate == nil {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		quarter := intstr.FromString("25%")
		if d.Spec.Strategy.RollingUpdate.MaxUnavailable == nil {
			v := quarter
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = &v
		}
		if d.Spec.Strategy.RollingUpdate.MaxSurge == nil {
			v := quarter
			d.Spec.Strategy.RollingUpdate.MaxSurge = &v
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr(int32(10))
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptr(int32(600))
	}
	defaultPodSpec(&d.Spec.Template.Spec)
}

func defaultService(s *corev1.Service) {
	if s.Spec.SessionAffinity == "" {
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if s.Spec.Type == "" {
		s.Spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if s.Spec.InternalTrafficPolicy == nil && s.Spec.Type != corev1.ServiceTypeExternalName {
		p := corev1.ServiceInternalTrafficPolicyCluster
		s.Spec.InternalTrafficPolicy = &p
	}
	if s.Spec.Type != corev1.ServiceTypeExternalName {
		if len(s.Spec.IPFamilies) == 0 {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		}
		if s.Spec.IPFamilyPolicy == nil {
			p := corev1.IPFamilyPolicySingleStack
			s.Spec.IPFamilyPolicy = &p
		}
	}
}

func defaultNetworkPolicy(np *networkingv1.NetworkPolicy) {
	if len(np.Spec.PolicyTypes) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) != 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
	tcp := func(ports []networkingv1.NetworkPolicyPort) {
		for i := range ports {
			if ports[i].Protocol == nil {
				p := corev1.ProtocolTCP
				ports[i].Protocol = &p
			}
		}
	}
	for i := range np.Spec.Ingress {
		tcp(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		tcp(np.Spec.Egress[i].Ports)
	}
}

func defaultPodSpec(s *corev1.PodSpec) {
	if s.ServiceAccountName == "" {
		s.ServiceAccountName = s.DeprecatedServiceAccount
	}
	s.DeprecatedServiceAccount = s.ServiceAccountName
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr(int64(corev1.DefaultTerminationGracePeriodSeconds))
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i])
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i])
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i])
	}
}

func defaultVolume(v *corev1.Volume) {
	src := &v.VolumeSource
	switch {
	case src.ConfigMap != nil:
		if src.ConfigMap.DefaultMode == nil {
			src.ConfigMap.DefaultMode = ptr(int32(corev1.ConfigMapVolumeSourceDefaultMode))
		}
	case src.Secret != nil:
		if src.Secret.DefaultMode == nil {
			src.Secret.DefaultMode = ptr(int32(corev1.SecretVolumeSourceDefaultMode))
		}
	case src.DownwardAPI != nil:
		if src.DownwardAPI.DefaultMode == nil {
			src.DownwardAPI.DefaultMode = ptr(int32(corev1.DownwardAPIVolumeSourceDefaultMode))
		}
		for i := range src.DownwardAPI.Items {
			if f := src.DownwardAPI.Items[i].FieldRef; f != nil && f.APIVersion == "" {
				f.APIVersion = "v1"
			}
		}
	case src.Projected != nil:
		if src.Projected.DefaultMode == nil {
			src.Projected.DefaultMode = ptr(int32(corev1.ProjectedVolumeSourceDefaultMode))
		}
	case src.EmptyDir == nil && src.PersistentVolumeClaim == nil && src.HostPath == nil && src.CSI == nil && src.Ephemeral == nil:
		src.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
}

func defaultContainer(ctr *corev1.Container) {
	if ctr.ImagePullPolicy == "" {
		if imageTag(ctr.Image) == "latest" {
			ctr.ImagePullPolicy = corev1.PullAlways
		} else {
			ctr.ImagePullPolicy = corev1.PullIfNotPresent
		}
	}
	if ctr.TerminationMessagePath == "" {
		ctr.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if ctr.TerminationMessagePolicy == "" {
		ctr.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range ctr.Ports {
		if ctr.Ports[i].Protocol == "" {
			ctr.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range ctr.Env {
		if vf := ctr.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
	for _, p := range []*corev1.Probe{ctr.LivenessProbe, ctr.ReadinessProbe, ctr.StartupProbe} {
		defaultProbe(p)
	}
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if h := p.HTTPGet; h != nil {
		if h.Path == "" {
			h.Path = "/"
		}
		if h.Scheme == "" {
			h.Scheme = corev1.URISchemeHTTP
		}
	}
}

// imageTag is the tag of an image reference, "latest" when it has neither tag nor digest.
func imageTag(image string) string {
	if strings.Contains(image, "@") {
		return ""
	}
	last := image[strings.LastIndex(image, "/")+1:]
	if i := strings.LastIndex(last, ":"); i >= 0 {
		return last[i+1:]
	}
	return "latest"
}

// defaultPod gives a Pod a controller creates what the API server gives every Pod.
func (c *Cluster) defaultPod(p *corev1.Pod) {
	defaultPodSpec(&p.Spec)
	if p.Spec.EnableServiceLinks == nil {
		p.Spec.EnableServiceLinks = ptr(corev1.DefaultEnableServiceLinks)
	}
	if p.Spec.Priority == nil {
		p.Spec.Priority = ptr(int32(0))
	}
}

func ptr[T any](v T) *T { return &v }
