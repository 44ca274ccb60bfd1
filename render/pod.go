package render

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

func durability(f *v1alpha1.CelldFleet) string {
	if f.Spec.Profile == v1alpha1.ProfilePersistentFleet {
		return "fleet"
	}
	return "bucket"
}

func renderEnv(f *v1alpha1.CelldFleet) []corev1.EnvVar {
	client, peer := ports(f)
	env := []corev1.EnvVar{
		{Name: "CELLD_DURABILITY", Value: durability(f)},
		{Name: "CELLD_FLEET_NAME", Value: f.Name},
		{Name: "CELLD_FLEET_UID", Value: string(f.UID)},
		{Name: "CELLD_MEMBER_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "CELLD_PEER_DOMAIN", Value: f.Name + PeerServiceSuffix + "." + f.Namespace + ".svc"},
		{Name: "CELLD_CLIENT_PORT", Value: strconv.Itoa(int(client))},
		{Name: "CELLD_PEER_PORT", Value: strconv.Itoa(int(peer))},
		{Name: "CELLD_BUCKET_NAME", Value: f.Spec.Bucket.Name},
		{Name: "CELLD_BUCKET_REGION", Value: f.Spec.Bucket.Region},
	}
	if f.Spec.Bucket.Endpoint != "" {
		env = append(env, corev1.EnvVar{Name: "CELLD_BUCKET_ENDPOINT", Value: f.Spec.Bucket.Endpoint})
	}
	return env
}

// defaultSpread spreads members across nodes (hard) and zones (soft), so losing a node takes at
// most one member, which is what celld tolerates. Tainted nodes (unreachable, NotReady) are left
// out of the count: otherwise a lost node would still hold its share and keep the replacement of
// its member Pending on a cluster with no spare node.
func defaultSpread(f *v1alpha1.CelldFleet) []corev1.TopologySpreadConstraint {
	sel := &metav1.LabelSelector{MatchLabels: SelectorLabels(f)}
	honor := corev1.NodeInclusionPolicyHonor
	return []corev1.TopologySpreadConstraint{
		{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel, NodeTaintsPolicy: &honor},
		{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel, NodeTaintsPolicy: &honor},
	}
}

func spread(f *v1alpha1.CelldFleet) []corev1.TopologySpreadConstraint {
	if len(f.Spec.Placement.TopologySpreadConstraints) == 0 {
		return defaultSpread(f)
	}
	out := make([]corev1.TopologySpreadConstraint, len(f.Spec.Placement.TopologySpreadConstraints))
	for i, c := range f.Spec.Placement.TopologySpreadConstraints {
		c = *c.DeepCopy()
		if c.LabelSelector == nil {
			c.LabelSelector = &metav1.LabelSelector{MatchLabels: SelectorLabels(f)}
		}
		out[i] = c
	}
	return out
}

// renderPodTemplate runs celld directly as the only container: no launcher, wrapper or init
// container, and the image the user names. The security context meets the restricted Pod
// Security level.
func renderPodTemplate(f *v1alpha1.CelldFleet) corev1.PodTemplateSpec {
	client, peer := ports(f)
	c := corev1.Container{
		Name:            ContainerName,
		Image:           f.Spec.Image,
		ImagePullPolicy: f.Spec.ImagePullPolicy,
		Ports: []corev1.ContainerPort{
			{Name: clientPortName, ContainerPort: client, Protocol: corev1.ProtocolTCP},
			{Name: peerPortName, ContainerPort: peer, Protocol: corev1.ProtocolTCP},
		},
		Env:       append(renderEnv(f), userEnv(f)...),
		Resources: f.Spec.Resources.Container(),
		EnvFrom:   envFrom(f.Spec.Pod.EnvFrom),
		VolumeMounts: append([]corev1.VolumeMount{
			{Name: events.DataVolume, MountPath: DataMountPath},
			{Name: ScratchVolume, MountPath: ScratchMountPath},
		}, userMounts(f, f.Spec.Pod.VolumeMounts)...),
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString(clientPortName)},
		}},
		SecurityContext: containerSecurity(),
	}
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: podLabels(f), Annotations: podAnnotations(f)},
		Spec: corev1.PodSpec{
			InitContainers:     sidecars(f),
			Containers:         []corev1.Container{c},
			ServiceAccountName: f.Spec.ServiceAccountName,
			ImagePullSecrets:   pullSecrets(f),
			PriorityClassName:  f.Spec.Pod.PriorityClassName,
			// Members get the Kubernetes API token only when the fleet asks: celld never calls the API.
			AutomountServiceAccountToken: ptrTo(f.Spec.AutomountServiceAccountToken != nil && *f.Spec.AutomountServiceAccountToken),
			NodeSelector:                 f.Spec.Placement.NodeSelector,
			Tolerations:                  f.Spec.Placement.Tolerations,
			Affinity:                     f.Spec.Placement.Affinity,
			TopologySpreadConstraints:    spread(f),
			SecurityContext:              podSecurity(f),
		},
	}
	if f.Spec.Profile != v1alpha1.ProfilePersistentFleet {
		var limit *resource.Quantity
		if f.Spec.Scratch != nil && f.Spec.Scratch.SizeLimit != nil {
			q := f.Spec.Scratch.SizeLimit.DeepCopy()
			limit = &q
		}
		t.Spec.Volumes = []corev1.Volume{{Name: events.DataVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: limit}}}}
	}
	scratch := ScratchLimit.DeepCopy()
	t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{Name: ScratchVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &scratch}}})
	t.Spec.Volumes = append(t.Spec.Volumes, userVolumes(f)...)
	return t
}

// containerSecurity meets the restricted Pod Security level, for celld and every sidecar.
func containerSecurity() *corev1.SecurityContext {
	no, yes := false, true
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: &no,
		ReadOnlyRootFilesystem:   &yes,
		RunAsNonRoot:             &yes,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}
