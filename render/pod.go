package render

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

func durability(f *v1alpha1.CelldFleet) string {
	if f.Spec.Profile == v1alpha1.ProfilePersistentFleet {
		return "fleet"
	}
	return "bucket"
}

// ownedEnv are the variables the operator sets in celld's container, in the order it renders
// them: the one list rendering and its tests read. Each is an explicit variable of the container
// whenever spec.pod.envFrom may supply one of its name (a prefix such as CELL with a key
// D_BUCKET_ENDPOINT spells one too), empty when the fleet leaves it unset: Kubernetes lets an
// explicit variable win over envFrom, so a key of a Secret or ConfigMap never reaches celld in
// the operator's place (a bucket endpoint other than the one the reservation and the bucket
// policy allowed). celld reads an empty variable as an unset one.
var ownedEnv = []struct {
	name  string
	value func(f *v1alpha1.CelldFleet) corev1.EnvVar
	// optional is left out when unset and nothing could supply it: the members of such a fleet
	// render as releases before this one did, so an upgrade does not roll them.
	optional bool
}{
	{"CELLD_DURABILITY", func(f *v1alpha1.CelldFleet) corev1.EnvVar { return corev1.EnvVar{Value: durability(f)} }, false},
	{"CELLD_FLEET_NAME", func(f *v1alpha1.CelldFleet) corev1.EnvVar { return corev1.EnvVar{Value: f.Name} }, false},
	{"CELLD_FLEET_UID", func(f *v1alpha1.CelldFleet) corev1.EnvVar { return corev1.EnvVar{Value: string(f.UID)} }, false},
	{"CELLD_MEMBER_NAME", func(*v1alpha1.CelldFleet) corev1.EnvVar {
		return corev1.EnvVar{ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}
	}, false},
	{"CELLD_PEER_DOMAIN", func(f *v1alpha1.CelldFleet) corev1.EnvVar {
		return corev1.EnvVar{Value: f.Name + kinds.SuffixPeers + "." + f.Namespace + ".svc"}
	}, false},
	{"CELLD_CLIENT_PORT", func(f *v1alpha1.CelldFleet) corev1.EnvVar {
		client, _ := ports(f)
		return corev1.EnvVar{Value: strconv.Itoa(int(client))}
	}, false},
	{"CELLD_PEER_PORT", func(f *v1alpha1.CelldFleet) corev1.EnvVar {
		_, peer := ports(f)
		return corev1.EnvVar{Value: strconv.Itoa(int(peer))}
	}, false},
	{"CELLD_BUCKET_NAME", func(f *v1alpha1.CelldFleet) corev1.EnvVar { return corev1.EnvVar{Value: f.Spec.Bucket.Name} }, false},
	{"CELLD_BUCKET_REGION", func(f *v1alpha1.CelldFleet) corev1.EnvVar { return corev1.EnvVar{Value: f.Spec.Bucket.Region} }, false},
	{"CELLD_BUCKET_ENDPOINT", func(f *v1alpha1.CelldFleet) corev1.EnvVar { return corev1.EnvVar{Value: f.Spec.Bucket.Endpoint} }, true},
}

// OwnedEnv names the variables the operator sets in celld's container.
func OwnedEnv() []string {
	names := make([]string, len(ownedEnv))
	for i, o := range ownedEnv {
		names[i] = o.name
	}
	return names
}

func renderEnv(f *v1alpha1.CelldFleet) []corev1.EnvVar {
	shadowed := len(envFrom(f.Spec.Pod.EnvFrom)) > 0
	env := make([]corev1.EnvVar, 0, len(ownedEnv))
	for _, o := range ownedEnv {
		v := o.value(f)
		if o.optional && v.Value == "" && v.ValueFrom == nil && !shadowed {
			continue
		}
		v.Name = o.name
		env = append(env, v)
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
			{Name: kinds.DataVolume, MountPath: DataMountPath},
			{Name: ScratchVolume, MountPath: ScratchMountPath},
		}, userMounts(f, f.Spec.Pod.VolumeMounts)...),
		ReadinessProbe:  readinessProbe(f),
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
		t.Spec.Volumes = []corev1.Volume{{Name: kinds.DataVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: limit}}}}
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
