package machine

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/bucket"
	"github.com/celld/celld-operator/events"
)

// Container and volume layout of a member.
const (
	ContainerName = "celld"
	DataMountPath = "/var/lib/celld"
	// The root filesystem is read-only; celld's temporary files go to a scratch emptyDir of
	// ScratchLimit at ScratchMountPath.
	ScratchVolume    = "tmp"
	ScratchMountPath = "/tmp"
	// PeerServiceSuffix names the headless peer Service: "<fleet>-peers".
	PeerServiceSuffix = "-peers"
	clientPortName    = "client"
	peerPortName      = "peer"
	defaultClientPort = 7000
	defaultPeerPort   = 7001
)

// ScratchLimit bounds the scratch mount: temporary files, not data, which has a volume of its own.
var ScratchLimit = resource.MustParse("256Mi")

// Objects is everything rendered for one fleet, in the order it is applied: prerequisites first,
// the workload last.
type Objects struct {
	Services    []*corev1.Service
	Policies    []*networkingv1.NetworkPolicy
	PDB         *policyv1.PodDisruptionBudget
	StatefulSet *appsv1.StatefulSet
	Deployment  *appsv1.Deployment
}

// All lists the rendered objects in apply order.
func (o *Objects) All() []any {
	out := make([]any, 0, 6)
	for _, s := range o.Services {
		out = append(out, s)
	}
	for _, p := range o.Policies {
		out = append(out, p)
	}
	out = append(out, o.PDB)
	if o.StatefulSet != nil {
		out = append(out, o.StatefulSet)
	}
	if o.Deployment != nil {
		out = append(out, o.Deployment)
	}
	return out
}

// UsesStatefulSet reports whether the fleet's members run as a StatefulSet.
func UsesStatefulSet(spec *v1alpha1.CelldFleetSpec) bool {
	return spec.Profile == v1alpha1.ProfilePersistentFleet || spec.Workload == v1alpha1.WorkloadOrderedStatefulSet
}

// SelectorLabels select a fleet's members. They are immutable for the workload's life.
func SelectorLabels(f *v1alpha1.CelldFleet) map[string]string {
	return map[string]string{
		events.LabelName:     events.AppName,
		events.LabelInstance: f.Name,
		events.LabelFleetUID: string(f.UID),
	}
}

// Selector is the member selector as the scale subresource shows it.
func Selector(f *v1alpha1.CelldFleet) string {
	return labels.SelectorFromSet(SelectorLabels(f)).String()
}

func objectLabels(f *v1alpha1.CelldFleet, component string) map[string]string {
	l := SelectorLabels(f)
	l[events.LabelManagedBy] = events.ManagedBy
	l[events.LabelComponent] = component
	return l
}

func ownerRefs(f *v1alpha1.CelldFleet) []metav1.OwnerReference {
	t := true
	return []metav1.OwnerReference{{
		APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "CelldFleet",
		Name: f.Name, UID: f.UID, Controller: &t, BlockOwnerDeletion: &t,
	}}
}

func meta(f *v1alpha1.CelldFleet, name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: f.Namespace, Labels: objectLabels(f, component), OwnerReferences: ownerRefs(f)}
}

func ports(f *v1alpha1.CelldFleet) (client, peer int32) {
	client, peer = f.Spec.Network.ClientPort, f.Spec.Network.PeerPort
	if client == 0 {
		client = defaultClientPort
	}
	if peer == 0 {
		peer = defaultPeerPort
	}
	return client, peer
}

// Render renders every object of a fleet with the workload at replicas. settled is the size
// whose rollout last completed, recorded on the workload; -1 records none.
func Render(f *v1alpha1.CelldFleet, replicas, settled int32) *Objects {
	o := &Objects{
		Services: []*corev1.Service{renderClientService(f), renderPeerService(f)},
		Policies: renderPolicies(f),
		PDB:      renderPDB(f),
	}
	tmpl := renderPodTemplate(f)
	annotations := map[string]string(nil)
	if settled >= 0 {
		annotations = map[string]string{events.AnnotationSettled: strconv.Itoa(int(settled))}
	}
	if UsesStatefulSet(&f.Spec) {
		o.StatefulSet = renderStatefulSet(f, replicas, tmpl, annotations)
	} else {
		o.Deployment = renderDeployment(f, replicas, tmpl, annotations)
	}
	return o
}

func renderClientService(f *v1alpha1.CelldFleet) *corev1.Service {
	client, _ := ports(f)
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(f, f.Name, "client"),
		Spec: corev1.ServiceSpec{
			Selector: SelectorLabels(f),
			Ports: []corev1.ServicePort{{Name: clientPortName, Port: client, TargetPort: intstr.FromString(clientPortName),
				Protocol: corev1.ProtocolTCP}},
		},
	}
}

// renderPeerService is headless and publishes not-ready addresses, so every member has stable
// per-Pod DNS before it is ready: a recovering member must reach its peers to become ready.
func renderPeerService(f *v1alpha1.CelldFleet) *corev1.Service {
	client, peer := ports(f)
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(f, f.Name+PeerServiceSuffix, "peers"),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 SelectorLabels(f),
			Ports: []corev1.ServicePort{
				{Name: peerPortName, Port: peer, TargetPort: intstr.FromString(peerPortName), Protocol: corev1.ProtocolTCP},
				{Name: clientPortName, Port: client, TargetPort: intstr.FromString(clientPortName), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// renderPolicies selects the members in two policies; a Pod selected by any Ingress policy denies
// every ingress no policy allows, so together they allow peers on the peer port and clients on
// the client port, and nothing else.
func renderPolicies(f *v1alpha1.CelldFleet) []*networkingv1.NetworkPolicy {
	client, peer := ports(f)
	tcp := corev1.ProtocolTCP
	members := metav1.LabelSelector{MatchLabels: SelectorLabels(f)}
	clients := f.Spec.Network.AllowedClients
	if len(clients) == 0 {
		clients = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	}
	peerPort, clientPort := intstr.FromInt32(peer), intstr.FromInt32(client)
	policy := func(suffix string, from []networkingv1.NetworkPolicyPeer, port *intstr.IntOrString) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			ObjectMeta: meta(f, f.Name+suffix, "network-policy"),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: members,
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  from,
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: port}},
				}},
			},
		}
	}
	return []*networkingv1.NetworkPolicy{
		policy("-clients", clients, &clientPort),
		policy("-peers", []networkingv1.NetworkPolicyPeer{{PodSelector: &members}}, &peerPort),
	}
}

// renderPDB lets voluntary disruptions (drains) take one member at a time, matching what celld
// tolerates.
func renderPDB(f *v1alpha1.CelldFleet) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: meta(f, f.Name, "disruption-budget"),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &one,
			Selector:       &metav1.LabelSelector{MatchLabels: SelectorLabels(f)},
		},
	}
}

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
	no, yes := false, true
	c := corev1.Container{
		Name:            ContainerName,
		Image:           f.Spec.Image,
		ImagePullPolicy: f.Spec.ImagePullPolicy,
		Ports: []corev1.ContainerPort{
			{Name: clientPortName, ContainerPort: client, Protocol: corev1.ProtocolTCP},
			{Name: peerPortName, ContainerPort: peer, Protocol: corev1.ProtocolTCP},
		},
		Env:       renderEnv(f),
		Resources: f.Spec.Resources.Container(),
		VolumeMounts: []corev1.VolumeMount{
			{Name: events.DataVolume, MountPath: DataMountPath},
			{Name: ScratchVolume, MountPath: ScratchMountPath},
		},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString(clientPortName)},
		}},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no,
			ReadOnlyRootFilesystem:   &yes,
			RunAsNonRoot:             &yes,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: objectLabels(f, "member")},
		Spec: corev1.PodSpec{
			Containers:         []corev1.Container{c},
			ServiceAccountName: f.Spec.ServiceAccountName,
			// Members get the Kubernetes API token only when the fleet asks: celld never calls the API.
			AutomountServiceAccountToken: ptrTo(f.Spec.AutomountServiceAccountToken != nil && *f.Spec.AutomountServiceAccountToken),
			NodeSelector:                 f.Spec.Placement.NodeSelector,
			Tolerations:                  f.Spec.Placement.Tolerations,
			Affinity:                     f.Spec.Placement.Affinity,
			TopologySpreadConstraints:    spread(f),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
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
	if at := f.Annotations[v1alpha1.AnnotationRestartedAt]; at != "" {
		// A new template is a rollout: the workload's controller replaces the members one at a
		// time, as for a new image.
		t.Annotations = map[string]string{v1alpha1.AnnotationRestartedAt: at}
	}
	return t
}

func renderStatefulSet(f *v1alpha1.CelldFleet, replicas int32, tmpl corev1.PodTemplateSpec, annotations map[string]string) *appsv1.StatefulSet {
	zero := int32(0)
	m := meta(f, f.Name, "workload")
	m.Annotations = annotations
	s := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: m,
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			Selector:            &metav1.LabelSelector{MatchLabels: SelectorLabels(f)},
			Template:            tmpl,
			ServiceName:         f.Name + PeerServiceSuffix,
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			// An explicit partition: with type RollingUpdate alone the API server leaves the block
			// nil, and the controller then recreates a deleted Pod below status.currentReplicas at
			// the current revision, so replacing a member stuck on a broken revision would bring
			// the broken revision back.
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &zero},
			},
		},
	}
	if st := f.Spec.Storage; f.Spec.Profile == v1alpha1.ProfilePersistentFleet && st != nil {
		sc := st.StorageClassName
		s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: events.DataVolume, Labels: objectLabels(f, "disk")},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &sc,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: st.Size.DeepCopy()}},
			},
		}}
		// Retained disks: neither a scale-in nor the StatefulSet's deletion removes them; only the
		// fleet's deletion does, through the operator, once no member is left.
		s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		}
	}
	return s
}

// renderDeployment never takes a member away before its replacement is ready.
func renderDeployment(f *v1alpha1.CelldFleet, replicas int32, tmpl corev1.PodTemplateSpec, annotations map[string]string) *appsv1.Deployment {
	m := meta(f, f.Name, "workload")
	m.Annotations = annotations
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: m,
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: SelectorLabels(f)},
			Template: tmpl,
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &zero, MaxSurge: &one},
			},
		},
	}
}

// ReservationName names the reservation of a bucket after its canonical identity, so every
// spelling of one bucket names one reservation and no bucket name equals a derived one.
func ReservationName(b v1alpha1.BucketSpec) string {
	return bucket.ReservationName(bucket.Of(b))
}

// RenderReservation renders the reservation that binds the fleet's bucket to its UID. It has no
// owner reference: it outlives the fleet.
func RenderReservation(f *v1alpha1.CelldFleet) *v1alpha1.CelldReservation {
	l := SelectorLabels(f)
	l[events.LabelManagedBy] = events.ManagedBy
	l[events.LabelComponent] = "reservation"
	return &v1alpha1.CelldReservation{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "CelldReservation"},
		ObjectMeta: metav1.ObjectMeta{Name: ReservationName(f.Spec.Bucket), Namespace: f.Namespace, Labels: l},
		Spec: v1alpha1.CelldReservationSpec{
			FleetName: f.Name, FleetUID: f.UID, Profile: f.Spec.Profile, Bucket: f.Spec.Bucket,
		},
	}
}

func ptrTo[T any](v T) *T { return &v }
