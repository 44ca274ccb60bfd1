package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Profile is how a fleet keeps its data durable.
// +kubebuilder:validation:Enum=Bucket;PersistentFleet
type Profile string

const (
	// ProfileBucket keeps durable data in the fleet's bucket; members have a scratch disk only.
	ProfileBucket Profile = "Bucket"
	// ProfilePersistentFleet keeps durable data on retained CSI disks, one per member.
	ProfilePersistentFleet Profile = "PersistentFleet"
)

// WorkloadKind is the Kubernetes workload that runs a Bucket fleet's members.
// +kubebuilder:validation:Enum=Deployment;OrderedStatefulSet
type WorkloadKind string

const (
	// WorkloadDeployment runs members as a Deployment (the Bucket default).
	WorkloadDeployment WorkloadKind = "Deployment"
	// WorkloadOrderedStatefulSet runs members as a StatefulSet with OrderedReady pod management.
	WorkloadOrderedStatefulSet WorkloadKind = "OrderedStatefulSet"
)

// CapacityMode says who sets the fleet's size.
// +kubebuilder:validation:Enum=Manual;Recommend;Auto
type CapacityMode string

const (
	// CapacityManual: spec.members is the size; recommendations are not computed.
	CapacityManual CapacityMode = "Manual"
	// CapacityRecommend: spec.members is the size; status.recommendedMembers shows a recommendation.
	CapacityRecommend CapacityMode = "Recommend"
	// CapacityAuto: the recommendation, bounded by minMembers and maxMembers, is the size.
	CapacityAuto CapacityMode = "Auto"
)

// FleetState is the lifecycle state of a fleet, derived from what the operator observes.
type FleetState string

const (
	StateProvisioning FleetState = "Provisioning"
	StateSteady       FleetState = "Steady"
	StateGrowing      FleetState = "Growing"
	StateShrinkingOne FleetState = "ShrinkingOne"
	StateHealing      FleetState = "Healing"
	StateDeleting     FleetState = "Deleting"
	// StateHibernating: spec.hibernate asks the fleet to sleep and its members are stopping.
	StateHibernating FleetState = "Hibernating"
	// StateHibernated: the fleet sleeps: no workload, no member, its disks, reservation and
	// bucket kept.
	StateHibernated FleetState = "Hibernated"
	// StateWaking: the fleet's workload was created again at spec.members over the disks it
	// kept, and not every member is ready yet.
	StateWaking FleetState = "Waking"
)

// Condition types of a CelldFleet.
const (
	ConditionReady            = "Ready"
	ConditionProgressing      = "Progressing"
	ConditionDegraded         = "Degraded"
	ConditionReservationBound = "ReservationBound"
	// ConditionReconciliationPaused is True while the fleet carries AnnotationPaused; absent
	// otherwise.
	ConditionReconciliationPaused = "ReconciliationPaused"
	// ConditionSettingsOverridden is True while spec.pod names a label, annotation or environment
	// variable the operator sets itself, whose value the operator keeps; absent otherwise.
	ConditionSettingsOverridden = "SettingsOverridden"
	// ConditionDisksResizing is True while a claim of the fleet is smaller than spec.storage.size
	// or its filesystem has yet to grow.
	ConditionDisksResizing = "DisksResizing"
	// ConditionHibernated is True while the fleet sleeps (spec.hibernate, every member stopped),
	// False with a reason while it is on its way to sleep or waking; absent otherwise.
	ConditionHibernated = "Hibernated"
)

// AnnotationPaused on a fleet stops the operator from writing anything but the fleet's status:
// no workload, Service, policy, budget, disk, reservation or finalizer change, not even to
// delete the fleet. Any value but "false" pauses, so a misspelt "true" does not go unnoticed
// as a fleet that keeps changing. Removing it (or "false") resumes with one decision on the
// fleet as it is then.
const AnnotationPaused = "celld.io/paused"

// AnnotationRestartedAt on a fleet asks for a rolling restart: the operator copies its value
// into the members' Pod template, so the workload's controller replaces every member once, one
// at a time, each after the previous is ready; the operator itself deletes no Pod. Setting a
// new value (kubectl celld restart sets the time) restarts again.
const AnnotationRestartedAt = "celld.io/restartedAt"

// AnnotationFilesystemResize on the members' Pod template is the disk size whose filesystem
// needed its members to start again: a claim's volume grew and its filesystem waits for the
// volume to be mounted again (FileSystemResizePending). The operator sets it once per size, so
// the workload's controller restarts the members one at a time, each after the previous is
// ready; the operator itself deletes no Pod.
const AnnotationFilesystemResize = "celld.io/filesystem-resize"

// Paused reports whether the fleet carries AnnotationPaused with a value other than "false".
func (f *CelldFleet) Paused() bool {
	v, ok := f.Annotations[AnnotationPaused]
	return ok && v != "false"
}

// FleetFinalizer holds a fleet until its members are gone and, for PersistentFleet, its disks deleted.
const FleetFinalizer = "celld.io/fleet-protection"

// CelldFleet is one independent celld cluster: its members, their workload, Services,
// NetworkPolicies, PodDisruptionBudget and, for PersistentFleet, their disks.
//
// The names of its objects are derived from its own ("NAME-peers", "NAME-clients"), so a name
// that ends in one of those suffixes is refused: it would name another fleet's objects.
// +kubebuilder:validation:XValidation:rule="!self.metadata.name.endsWith('-peers') && !self.metadata.name.endsWith('-clients')",message="metadata.name must not end in -peers or -clients: the operator names a fleet's peer Service NAME-peers and its NetworkPolicies NAME-peers and NAME-clients, so this name would collide with the objects of the fleet named without the suffix"
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=cf,categories=celld
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.members,statuspath=.status.members.current,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Profile",type=string,JSONPath=`.spec.profile`,description="Bucket or PersistentFleet"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.members.desired`,description="The size the operator works toward (spec.members, or the recommendation in Auto mode)"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.members.ready`,description="Members ready"
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,description="Lifecycle state"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1,description="The members' image"
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.members.updated`,priority=1,description="Members on the workload's current template"
// +kubebuilder:printcolumn:name="Blocked-By",type=string,JSONPath=`.status.blockedBy`,priority=1,description="What the fleet waits for"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="metadata.name must be at most 52 characters: a member Pod carries the label controller-revision-hash=<name>-<hash of up to 10 characters>, and a label value is at most 63 characters"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label starting with a letter (lowercase letters, digits and hyphens, no dots): it names the fleet's Services, which must be DNS-1035 labels"
type CelldFleet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the fleet the user asks for.
	Spec CelldFleetSpec `json:"spec"`
	// status is rebuilt from observation on every pass; the operator never reads it back to decide.
	// +optional
	Status CelldFleetStatus `json:"status,omitempty"`
}

// CelldFleetSpec is the desired fleet.
//
// +kubebuilder:validation:XValidation:rule="self.profile != 'PersistentFleet' || has(self.storage)",message="spec.storage is required when spec.profile is PersistentFleet: set storageClassName and size"
// +kubebuilder:validation:XValidation:rule="self.profile != 'Bucket' || !has(self.storage)",message="spec.storage applies to PersistentFleet only: remove it, or use spec.scratch for a Bucket fleet's temporary disk"
// +kubebuilder:validation:XValidation:rule="self.profile != 'PersistentFleet' || !has(self.scratch)",message="spec.scratch applies to Bucket only: a PersistentFleet's disk is spec.storage"
// +kubebuilder:validation:XValidation:rule="self.profile != 'PersistentFleet' || !has(self.workload)",message="spec.workload applies to Bucket only: a PersistentFleet always runs an ordered StatefulSet"
// +kubebuilder:validation:XValidation:rule="!has(self.capacity) || !has(self.capacity.minMembers) || self.capacity.minMembers <= self.members",message="spec.members must be at least spec.capacity.minMembers"
// +kubebuilder:validation:XValidation:rule="!has(self.capacity) || !has(self.capacity.maxMembers) || self.members <= self.capacity.maxMembers",message="spec.members must be at most spec.capacity.maxMembers"
// +kubebuilder:validation:XValidation:rule="!has(self.capacity) || !has(self.capacity.minMembers) || !has(self.capacity.maxMembers) || self.capacity.minMembers <= self.capacity.maxMembers",message="spec.capacity.minMembers must be at most spec.capacity.maxMembers"
// +kubebuilder:validation:XValidation:rule="has(self.workload) == has(oldSelf.workload) && (!has(self.workload) || self.workload == oldSelf.workload)",message="spec.workload is immutable: create a new CelldFleet to change the workload kind"
// +kubebuilder:validation:XValidation:rule="has(self.storage) == has(oldSelf.storage)",message="spec.storage cannot be added or removed: it follows spec.profile, which is immutable"
// +kubebuilder:validation:XValidation:rule="!(has(oldSelf.hibernate) && oldSelf.hibernate && has(self.hibernate) && self.hibernate) || self.members == oldSelf.members",message="spec.members cannot change while the fleet stays hibernated (spec.hibernate true): wake the fleet first (kubectl celld wake NAME), or set spec.hibernate false and spec.members in one write"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || self.profile == 'PersistentFleet' || (has(self.workload) && self.workload == 'OrderedStatefulSet')",message="spec.rollout needs a StatefulSet to hold a rollout at, and a Bucket fleet's default workload is a Deployment, which has none: create the fleet with spec.workload OrderedStatefulSet (or profile PersistentFleet) to stage rollouts, or remove spec.rollout"
type CelldFleetSpec struct {
	// profile is how the fleet keeps data durable: Bucket (emptyDir scratch disks, data in the
	// bucket) or PersistentFleet (a retained CSI disk per member). Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.profile is immutable: create a new CelldFleet to change profile"
	Profile Profile `json:"profile"`

	// members is the requested number of members. The scale subresource sets it, so
	// `kubectl scale`, HPA and KEDA work. Growth happens in one step; scale-in one member per step.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Members int32 `json:"members"`

	// image is the celld image every member runs as its only container (the compatible fork).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains(' ')",message="spec.image must not contain spaces"
	Image string `json:"image"`

	// imagePullPolicy of the celld container; the Kubernetes default when empty.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// resources of the celld container. Requests are the base of capacity recommendations.
	// +optional
	Resources ResourceRequirements `json:"resources,omitempty"`

	// serviceAccountName is the ServiceAccount members run as; it carries the runtime IAM role
	// that reaches the bucket. The namespace's default ServiceAccount when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// automountServiceAccountToken mounts the ServiceAccount's Kubernetes API token into members.
	// Off by default: celld does not call the Kubernetes API, and the cloud IAM integrations that
	// bind a role to serviceAccountName (EKS, GKE and AKS workload identity) inject a token of their
	// own. Turn it on only for an integration that reads the Kubernetes token itself.
	// +optional
	AutomountServiceAccountToken *bool `json:"automountServiceAccountToken,omitempty"`

	// bucket is the object-store bucket dedicated to this fleet. Immutable. A bucket is bound to one
	// fleet UID by a CelldReservation and refused to every other fleet until a person deletes it.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.bucket is immutable: a fleet's bucket is reserved to it for life"
	Bucket BucketSpec `json:"bucket"`

	// workload runs a Bucket fleet's members: Deployment (default) or OrderedStatefulSet. Immutable.
	// +optional
	Workload WorkloadKind `json:"workload,omitempty"`

	// storage is each PersistentFleet member's retained disk. Required for PersistentFleet. Its
	// size may grow (every claim of the fleet is enlarged, member by member, online where the
	// class allows it) and never shrink; its class is immutable.
	// +optional
	Storage *StorageSpec `json:"storage,omitempty"`

	// scratch is a Bucket member's temporary disk (an emptyDir).
	// +optional
	Scratch *ScratchSpec `json:"scratch,omitempty"`

	// placement constrains where members run. By default members spread across nodes (hard:
	// at most one member per node while nodes last) and zones (soft).
	// +optional
	Placement PlacementSpec `json:"placement,omitempty"`

	// capacity says who sets the size and how fast the fleet may scale in.
	// +optional
	Capacity CapacitySpec `json:"capacity,omitempty"`

	// network names the ports celld listens on and who may reach the client port.
	// +optional
	Network NetworkSpec `json:"network,omitempty"`

	// healing says when a member counts as unable to come back on its own.
	// +optional
	Healing HealingSpec `json:"healing,omitempty"`

	// pod adds the user's own settings to every member's Pod, beside what the operator renders.
	// +optional
	Pod PodSettings `json:"pod,omitempty"`

	// readiness times the members' readiness probe: how soon a member that stopped answering
	// ready counts as away, for its Service and for the disruption budget a drain obeys.
	// +optional
	Readiness *ReadinessSpec `json:"readiness,omitempty"`

	// rollout stages a change of the members' template (image, resources, settings, a restart):
	// the change reaches the highest-ordinal members first and holds there until a person
	// approves it (kubectl celld rollout approve NAME). StatefulSet workloads only: a Bucket fleet
	// needs spec.workload OrderedStatefulSet. Absent, a change rolls through every member.
	// +optional
	Rollout *RolloutSpec `json:"rollout,omitempty"`

	// hibernate, true, stops every member of the fleet at once and keeps everything it needs to
	// wake: its disks (PersistentFleet), its reservation and bucket, its Services, policies and
	// disruption budget, and spec.members. Set back to false (kubectl celld wake NAME), the
	// fleet starts again at spec.members on the disks it kept. spec.members cannot change while
	// the fleet stays hibernated. See docs/hibernation.md.
	// +optional
	Hibernate bool `json:"hibernate,omitempty"`
}

// RolloutSpec stages template changes. See docs/rollouts.md.
type RolloutSpec struct {
	// canary is how many members a template change updates before it holds: the members with
	// the highest ordinals. The rest wait until a person approves the revision
	// (annotation celld.io/rollout-approved=<revision>, which kubectl celld rollout approve
	// writes), and then update one at a time. A canary of the fleet's size or more holds nothing.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Canary int32 `json:"canary"`
}

// AnnotationRolloutApproved on a fleet approves the held rollout of the workload revision it
// names (the StatefulSet's status.updateRevision, shown as status.rollout.revision): the rest of
// the members then update, one at a time. It approves that revision only: a later change of the
// template is a new revision and holds again.
const AnnotationRolloutApproved = "celld.io/rollout-approved"

// PodSettings are what a platform adds to every Pod it runs: pull secrets, its own labels and
// annotations, a priority class and environment variables. Where one names what the operator
// sets itself (its labels, celld.io annotations, CELLD_ variables) the operator's value is used
// and the SettingsOverridden condition names it, so members never lose their selector, ports or
// bucket to a stray setting. Changing any of them rolls the members one at a time. Volumes,
// mounts and sidecars may not take the operator's names or paths at all: they are refused at
// admission.
// +kubebuilder:validation:XValidation:rule="!has(self.volumeMounts) || self.volumeMounts.all(m, has(self.volumes) && self.volumes.exists(v, v.name == m.name))",message="spec.pod.volumeMounts[].name must name a volume of spec.pod.volumes"
// +kubebuilder:validation:XValidation:rule="!has(self.sidecars) || self.sidecars.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, has(self.volumes) && self.volumes.exists(v, v.name == m.name)))",message="spec.pod.sidecars[].volumeMounts[].name must name a volume of spec.pod.volumes: a sidecar never mounts a member's data"
type PodSettings struct {
	// labels added to every member Pod, for example team: storage.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 253 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="spec.pod.labels keys must be label keys: an optional DNS prefix and a slash, then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, for example team or example.com/team"
	Labels map[string]LabelValue `json:"labels,omitempty"`

	// annotations added to every member Pod, for example prometheus.io/scrape: "true".
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 253 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="spec.pod.annotations keys must be annotation keys: an optional DNS prefix and a slash, then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	Annotations map[string]AnnotationValue `json:"annotations,omitempty"`

	// priorityClassName is the PriorityClass of every member Pod. It must exist before it is set:
	// a member Pod naming a missing class cannot be created, so the operator holds the fleet's
	// workload as it is (Degraded=PriorityClassMissing) until the class exists.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// imagePullSecrets name Secrets in the fleet's namespace that pull spec.image from a private
	// registry.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	ImagePullSecrets []PullSecret `json:"imagePullSecrets,omitempty"`

	// env adds environment variables to the celld container after the operator's own. A variable
	// named like one of the operator's (CELLD_...) is not used: the operator's value is, and the
	// SettingsOverridden condition names it.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	Env []EnvVar `json:"env,omitempty"`

	// envFrom adds every key of a Secret or ConfigMap as a variable of the celld container. The
	// operator's own variables take precedence over a key of the same name, and a prefix may not
	// start with CELLD_.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	EnvFrom []EnvFromSource `json:"envFrom,omitempty"`

	// securityContext sets the members' user, groups and volume ownership. Only what the
	// restricted Pod Security Standard allows can be set: members always run as non-root with
	// the runtime's default seccomp profile. When unset, volumes belong to group 65532.
	// +optional
	SecurityContext *PodSecurityContext `json:"securityContext,omitempty"`

	// volumes adds ConfigMap, Secret and emptyDir volumes to every member Pod, for example a CA
	// bundle. The names data and tmp and the prefix celld- are the operator's.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	Volumes []Volume `json:"volumes,omitempty"`

	// volumeMounts mounts volumes of spec.pod.volumes into the celld container, outside the
	// operator's paths /var/lib/celld and /tmp.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=mountPath
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`

	// sidecars run beside celld in every member Pod, for example a log shipper: they start
	// before celld and stop after it (native sidecar containers), with the same restricted
	// security context. They mount only volumes of spec.pod.volumes, never a member's data.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +listType=map
	// +listMapKey=name
	Sidecars []Sidecar `json:"sidecars,omitempty"`
}

// GroupID is a Linux user or group ID.
// +kubebuilder:validation:Minimum=0
// +kubebuilder:validation:Maximum=2147483647
type GroupID int64

// PodSecurityContext is the part of a Pod's security context that the restricted Pod Security
// Standard leaves to the user.
type PodSecurityContext struct {
	// runAsUser is the user every container runs as; 0 (root) is refused, as the restricted
	// standard refuses it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	RunAsUser *int64 `json:"runAsUser,omitempty"`
	// runAsGroup is the primary group every container runs as.
	// +optional
	RunAsGroup *GroupID `json:"runAsGroup,omitempty"`
	// fsGroup owns the members' volumes, including the data disk; 65532 when unset.
	// +optional
	FSGroup *GroupID `json:"fsGroup,omitempty"`
	// fsGroupChangePolicy: OnRootMismatch (the default) gives a volume to fsGroup only when its
	// root is not already the group's; Always walks every file at every start.
	// +optional
	// +kubebuilder:validation:Enum=OnRootMismatch;Always
	FSGroupChangePolicy *corev1.PodFSGroupChangePolicy `json:"fsGroupChangePolicy,omitempty"`
	// supplementalGroups are further groups of every container's first process.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	SupplementalGroups []GroupID `json:"supplementalGroups,omitempty"`
}

// EnvFromSource is every key of one Secret or ConfigMap, each under an optional prefix.
// +kubebuilder:validation:XValidation:rule="has(self.secretRef) != has(self.configMapRef)",message="spec.pod.envFrom[]: set exactly one of secretRef and configMapRef"
// +kubebuilder:validation:XValidation:rule="!has(self.prefix) || !self.prefix.startsWith('CELLD_')",message="spec.pod.envFrom[].prefix must not start with CELLD_: the operator's variables use it"
type EnvFromSource struct {
	// prefix is put before every key, for example TLS_.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z][-._a-zA-Z0-9]*$`
	Prefix string `json:"prefix,omitempty"`
	// secretRef names a Secret in the fleet's namespace.
	// +optional
	SecretRef *ObjectRef `json:"secretRef,omitempty"`
	// configMapRef names a ConfigMap in the fleet's namespace.
	// +optional
	ConfigMapRef *ObjectRef `json:"configMapRef,omitempty"`
}

// ObjectRef names a Secret or ConfigMap in the fleet's namespace.
type ObjectRef struct {
	// name of the Secret or ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// optional: when true a missing object leaves its variables unset instead of keeping the
	// member from starting.
	// +optional
	Optional *bool `json:"optional,omitempty"`
}

// Volume is a volume of every member Pod: exactly one of a ConfigMap, a Secret or an emptyDir.
// +kubebuilder:validation:XValidation:rule="[has(self.configMap), has(self.secret), has(self.emptyDir)].exists_one(x, x)",message="spec.pod.volumes[]: set exactly one of configMap, secret and emptyDir"
// +kubebuilder:validation:XValidation:rule="self.name != 'data' && self.name != 'tmp' && !self.name.startsWith('celld-')",message="spec.pod.volumes[].name: data, tmp and names starting with celld- are the operator's; choose another name"
type Volume struct {
	// name of the volume, as volumeMounts name it: a DNS label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// configMap projects the keys of a ConfigMap as files.
	// +optional
	ConfigMap *ConfigMapVolume `json:"configMap,omitempty"`
	// secret projects the keys of a Secret as files.
	// +optional
	Secret *SecretVolume `json:"secret,omitempty"`
	// emptyDir is an empty directory that lives as long as the Pod, for example for a sidecar
	// to share files with celld.
	// +optional
	EmptyDir *EmptyDirVolume `json:"emptyDir,omitempty"`
}

// ConfigMapVolume is a ConfigMap's keys as files.
type ConfigMapVolume struct {
	// name of the ConfigMap in the fleet's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// items chooses keys and their paths; every key when unset.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Items []KeyPath `json:"items,omitempty"`
	// defaultMode of the files, 0 to 0777 (decimal 511); 0644 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=511
	DefaultMode *int32 `json:"defaultMode,omitempty"`
	// optional: when true a missing ConfigMap mounts an empty directory.
	// +optional
	Optional *bool `json:"optional,omitempty"`
}

// SecretVolume is a Secret's keys as files.
type SecretVolume struct {
	// secretName names the Secret in the fleet's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SecretName string `json:"secretName"`
	// items chooses keys and their paths; every key when unset.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Items []KeyPath `json:"items,omitempty"`
	// defaultMode of the files, 0 to 0777 (decimal 511); 0644 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=511
	DefaultMode *int32 `json:"defaultMode,omitempty"`
	// optional: when true a missing Secret mounts an empty directory.
	// +optional
	Optional *bool `json:"optional,omitempty"`
}

// KeyPath puts one key at a relative path inside the volume.
// +kubebuilder:validation:XValidation:rule="!self.path.matches('(^|/)[.][.](/|$)')",message="spec.pod.volumes[].items[].path must not contain a '..' element"
type KeyPath struct {
	// key of the ConfigMap or Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
	// path of the file, relative to the volume, for example certs/ca.crt.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[^/]`
	Path string `json:"path"`
	// mode of the file, 0 to 0777 (decimal 511); the volume's defaultMode when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=511
	Mode *int32 `json:"mode,omitempty"`
}

// EmptyDirVolume is an empty directory, on the node's disk or in memory.
type EmptyDirVolume struct {
	// medium: empty for the node's disk, Memory for a tmpfs counted against the Pod's memory.
	// +optional
	// +kubebuilder:validation:Enum="";Memory
	Medium corev1.StorageMedium `json:"medium,omitempty"`
	// sizeLimit is the most the directory may hold, for example 64Mi.
	// +optional
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
}

// VolumeMount mounts one of spec.pod.volumes into a container.
// +kubebuilder:validation:XValidation:rule="!['/var/lib/celld', '/tmp'].exists(p, self.mountPath == p || self.mountPath.startsWith(p + '/'))",message="volumeMounts[].mountPath: /var/lib/celld and /tmp, and paths below them, are the operator's; choose another path"
// +kubebuilder:validation:XValidation:rule="!self.mountPath.matches('(^|/)[.][.](/|$)')",message="volumeMounts[].mountPath must not contain a '..' element"
type VolumeMount struct {
	// name of a volume of spec.pod.volumes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// mountPath is an absolute path in the container, for example /etc/celld/ca.
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[^:]*[^/:]$`
	MountPath string `json:"mountPath"`
	// readOnly mounts the volume read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}

// Sidecar is a container beside celld in every member Pod.
type Sidecar struct {
	// name of the container: a DNS label; celld and names starting with celld- are the
	// operator's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self != 'celld' && !self.startsWith('celld-')",message="spec.pod.sidecars[].name: celld and names starting with celld- are the operator's; choose another name"
	Name string `json:"name"`
	// image of the container, for example fluent/fluent-bit:3.2.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S+$`
	Image string `json:"image"`
	// imagePullPolicy: Always, IfNotPresent or Never.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// command replaces the image's entrypoint.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Command []string `json:"command,omitempty"`
	// args are the arguments of the command.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Args []string `json:"args,omitempty"`
	// env of the container.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	Env []EnvVar `json:"env,omitempty"`
	// envFrom adds every key of a Secret or ConfigMap as a variable.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	EnvFrom []EnvFromSource `json:"envFrom,omitempty"`
	// resources of the container.
	// +optional
	Resources SidecarResources `json:"resources,omitempty"`
	// volumeMounts mounts volumes of spec.pod.volumes.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=mountPath
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`
}

// SidecarResources are a sidecar's compute resources.
type SidecarResources struct {
	// limits are the most of each resource the container may use, for example memory: 64Mi.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// requests are the resources the container is scheduled with.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// LabelValue is a label's value: at most 63 letters, digits, '-', '_' or '.', starting and
// ending with a letter or digit, or empty.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`
type LabelValue string

// AnnotationValue is an annotation's value, bounded so that 32 of them stay well inside the
// API server's 256 KiB for all of a Pod's annotations.
// +kubebuilder:validation:MaxLength=4096
type AnnotationValue string

// PullSecret names a Secret of type kubernetes.io/dockerconfigjson in the fleet's namespace.
type PullSecret struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// EnvVar is an environment variable of the celld container: a literal value, or a key of a
// Secret or ConfigMap in the fleet's namespace.
// +kubebuilder:validation:XValidation:rule="!(has(self.value) && has(self.valueFrom))",message="spec.pod.env: set value or valueFrom, not both"
type EnvVar struct {
	// name of the variable: letters, digits, '_', '-' and '.', not starting with a digit.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z][-._a-zA-Z0-9]*$`
	Name string `json:"name"`
	// value of the variable.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Value string `json:"value,omitempty"`
	// valueFrom reads the value from a key of a Secret or ConfigMap.
	// +optional
	ValueFrom *EnvSource `json:"valueFrom,omitempty"`
}

// EnvSource is one key of one Secret or ConfigMap.
// +kubebuilder:validation:XValidation:rule="has(self.secretKeyRef) != has(self.configMapKeyRef)",message="spec.pod.env[].valueFrom: set exactly one of secretKeyRef and configMapKeyRef"
type EnvSource struct {
	// secretKeyRef selects a key of a Secret.
	// +optional
	SecretKeyRef *KeyRef `json:"secretKeyRef,omitempty"`
	// configMapKeyRef selects a key of a ConfigMap.
	// +optional
	ConfigMapKeyRef *KeyRef `json:"configMapKeyRef,omitempty"`
}

// KeyRef is a key of a named Secret or ConfigMap in the fleet's namespace.
type KeyRef struct {
	// name of the Secret or ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// key within it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
	// optional: when true a missing Secret, ConfigMap or key leaves the variable unset instead
	// of keeping the member from starting.
	// +optional
	Optional *bool `json:"optional,omitempty"`
}

// BucketSpec names an object-store bucket.
type BucketSpec struct {
	// name of the bucket: 3 to 63 lowercase letters, digits, dots and hyphens, starting and
	// ending with a letter or digit.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	// +kubebuilder:validation:XValidation:rule="!self.contains('..')",message="spec.bucket.name must not contain two adjacent dots"
	// +kubebuilder:validation:XValidation:rule="!self.contains('.-') && !self.contains('-.')",message="spec.bucket.name must not have a dot next to a hyphen: each dot-separated label starts and ends with a letter or digit (S3 bucket naming rules)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$')",message="spec.bucket.name must not be formatted as an IP address (S3 bucket naming rules)"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('xn--') && !self.startsWith('sthree-') && !self.startsWith('amzn-s3-demo-')",message="spec.bucket.name must not start with xn--, sthree- or amzn-s3-demo- (S3 bucket naming rules)"
	// +kubebuilder:validation:XValidation:rule="!self.endsWith('-s3alias') && !self.endsWith('--ol-s3') && !self.endsWith('.mrap') && !self.endsWith('--x-s3') && !self.endsWith('--table-s3')",message="spec.bucket.name must not end with -s3alias, --ol-s3, .mrap, --x-s3 or --table-s3 (S3 bucket naming rules)"
	Name string `json:"name"`

	// region of the bucket, for example us-east-1.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+$`
	Region string `json:"region"`

	// endpoint of an S3-compatible store; the provider's default (Amazon S3) when empty. Every
	// spelling of one store is one store: the bucket is identified by the endpoint's host (case,
	// trailing dot, port, scheme, path and user info aside) and its name.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^[hH][tT][tT][pP][sS]?://[^\s/?#]+([/?#][^\s]*)?$`
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getHostname() != ''",message="spec.bucket.endpoint must be an http or https URL with a host, for example https://s3.example.com"
	Endpoint string `json:"endpoint,omitempty"`
}

// ResourceRequirements are the celld container's compute resources, as a Pod's container has them,
// bounded so that every value admitted decodes as a quantity.
type ResourceRequirements struct {
	// limits are the most of each resource the container may use, for example cpu: 2.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, isQuantity(string(self[k])))",message="spec.resources.limits must be quantities, for example 500m or 2Gi"
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// requests are the resources the container is scheduled with, for example cpu: 500m.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, isQuantity(string(self[k])))",message="spec.resources.requests must be quantities, for example 500m or 2Gi"
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// claims name the Pod's resource claims the container uses.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	Claims []corev1.ResourceClaim `json:"claims,omitempty"`
}

// Container is the resources as a container spec carries them.
func (r *ResourceRequirements) Container() corev1.ResourceRequirements {
	c := corev1.ResourceRequirements{Limits: r.Limits.DeepCopy(), Requests: r.Requests.DeepCopy()}
	for _, x := range r.Claims {
		c.Claims = append(c.Claims, *x.DeepCopy())
	}
	return c
}

// StorageSpec is a PersistentFleet member's retained disk.
type StorageSpec struct {
	// storageClassName of each member's PersistentVolumeClaim; the class must exist. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.storage.storageClassName is immutable: a claim stays with the class that provisioned it; grow spec.storage.size instead, or move the data to a new CelldFleet"
	// +kubebuilder:validation:MaxLength=253
	StorageClassName string `json:"storageClassName"`

	// size of each member's disk, for example 100Gi. It may grow, never shrink: the operator
	// enlarges every claim of the fleet to it, and Kubernetes refuses a smaller claim.
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0')) && quantity(string(self)).isLessThan(quantity('1Pi'))",message="spec.storage.size must be a positive quantity below 1Pi, for example 100Gi"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || !isQuantity(string(oldSelf)) || quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",messageExpression="'spec.storage.size must not shrink below ' + string(oldSelf) + ': a disk and its filesystem only grow (Kubernetes refuses a smaller claim); keep it, or grow it'"
	Size resource.Quantity `json:"size"`
}

// ScratchSpec is a Bucket member's temporary disk.
type ScratchSpec struct {
	// sizeLimit of the emptyDir; unlimited when empty.
	// +optional
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0')) && quantity(string(self)).isLessThan(quantity('1Pi'))",message="spec.scratch.sizeLimit must be a positive quantity below 1Pi, for example 10Gi"
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
}

// PlacementSpec constrains where members are scheduled.
type PlacementSpec struct {
	// nodeSelector members must match.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// tolerations of the members.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// affinity of the members.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// topologySpreadConstraints replace the default spread (hard across nodes, soft across zones)
	// when set. Their label selectors may be left empty: the fleet's own selector is used.
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
}

// CapacitySpec says who sets the fleet's size and how fast it may scale in.
type CapacitySpec struct {
	// mode: Manual (spec.members is the size), Recommend (spec.members is the size and
	// status.recommendedMembers is shown), or Auto (the recommendation is the size).
	// +optional
	// +kubebuilder:default=Manual
	Mode CapacityMode `json:"mode,omitempty"`

	// minMembers is the fewest members a recommendation may ask for.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MinMembers *int32 `json:"minMembers,omitempty"`

	// maxMembers is the most members a recommendation may ask for.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxMembers *int32 `json:"maxMembers,omitempty"`

	// targetUtilization is the CPU utilization, in percent of requests, recommendations aim for.
	// +optional
	// +kubebuilder:default=70
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	TargetUtilization int32 `json:"targetUtilization,omitempty"`

	// scaleInStabilization is how long a request to scale in must stand before the first member is
	// removed. It is measured on the history kept in the fleet's CelldReservation, so it holds
	// across operator restarts. 0s scales in as soon as the previous change has rolled out.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('168h')",message="spec.capacity.scaleInStabilization must be at most 168h (one week), for example 5m"
	ScaleInStabilization *metav1.Duration `json:"scaleInStabilization,omitempty"`
}

// NetworkSpec names celld's ports and who may reach them.
//
// +kubebuilder:validation:XValidation:rule="!has(self.clientPort) || !has(self.peerPort) || self.clientPort != self.peerPort",message="spec.network.clientPort and spec.network.peerPort must differ"
type NetworkSpec struct {
	// clientPort is where clients reach celld.
	// +optional
	// +kubebuilder:default=7000
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	ClientPort int32 `json:"clientPort,omitempty"`

	// peerPort is where members reach each other; only members may reach it.
	// +optional
	// +kubebuilder:default=7001
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	PeerPort int32 `json:"peerPort,omitempty"`

	// allowedClients may reach the client port. Empty means every Pod of the fleet's namespace.
	// Each entry is a NetworkPolicy peer, and must name whom it allows: an entry that selects
	// every Pod of every namespace, or an ipBlock of every address, is refused (it would open the
	// client port to the whole cluster by mistake; name the namespaces or the Pods).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(p, has(p.podSelector) || has(p.namespaceSelector) || has(p.ipBlock))",message="spec.network.allowedClients: every entry must set podSelector, namespaceSelector or ipBlock; an empty entry names no one"
	// +kubebuilder:validation:XValidation:rule="!self.exists(p, has(p.namespaceSelector) && (!has(p.namespaceSelector.matchLabels) || size(p.namespaceSelector.matchLabels) == 0) && (!has(p.namespaceSelector.matchExpressions) || size(p.namespaceSelector.matchExpressions) == 0) && (!has(p.podSelector) || ((!has(p.podSelector.matchLabels) || size(p.podSelector.matchLabels) == 0) && (!has(p.podSelector.matchExpressions) || size(p.podSelector.matchExpressions) == 0))))",message="spec.network.allowedClients: an entry with an empty namespaceSelector and no podSelector (or an empty one) lets every Pod of every namespace reach the client port; name the namespaces (namespaceSelector.matchLabels, for example kubernetes.io/metadata.name) or the Pods (podSelector)"
	// +kubebuilder:validation:XValidation:rule="!self.exists(p, has(p.ipBlock) && (p.ipBlock.cidr.endsWith('/0')))",message="spec.network.allowedClients: an ipBlock of prefix length 0 lets every address reach the client port; name the clients' networks"
	AllowedClients []networkingv1.NetworkPolicyPeer `json:"allowedClients,omitempty"`
}

// HealingSpec says when a member counts as unable to come back on its own.
type HealingSpec struct {
	// unreachableGracePeriod is how long a member's node may be NotReady or unreachable (or a
	// member stuck not ready on an old revision) before the operator acts on it. A member on such
	// a node is never force-deleted: the node may be cut off but alive. Past this period a
	// Deployment's member is deleted gracefully, and a StatefulSet's member is reported
	// (Degraded=MemberUnreachable) until its node is tainted node.kubernetes.io/out-of-service or
	// deleted, when it is replaced at once.
	// At least 10s: a shorter grace acts on the first flap of a node's Ready condition.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="spec.healing.unreachableGracePeriod must be at least 10s: a shorter grace replaces a member on a heartbeat blip"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('168h')",message="spec.healing.unreachableGracePeriod must be at most 168h (one week), for example 5m"
	UnreachableGracePeriod *metav1.Duration `json:"unreachableGracePeriod,omitempty"`
}

// CelldFleetStatus is rebuilt from observation on every pass.
type CelldFleetStatus struct {
	// observedGeneration is the spec generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// state is the lifecycle state: Provisioning, Steady, Growing, ShrinkingOne, Healing, Deleting,
	// Hibernating, Hibernated or Waking.
	// +optional
	State FleetState `json:"state,omitempty"`
	// members counts the fleet's members.
	// +optional
	Members MemberCounts `json:"members,omitempty"`
	// recommendedMembers is the capacity recommendation (Recommend and Auto modes).
	// +optional
	RecommendedMembers *int32 `json:"recommendedMembers,omitempty"`
	// selector is the label selector of the fleet's member Pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`
	// blockedBy says, for a person, what the fleet waits for; empty when nothing.
	// +optional
	BlockedBy string `json:"blockedBy,omitempty"`
	// nextAction says, for a person, what the operator does next; empty when converged.
	// +optional
	NextAction string `json:"nextAction,omitempty"`
	// disks is the audit of PersistentVolumeClaims that carry the fleet's labels.
	// +optional
	Disks *DiskAudit `json:"disks,omitempty"`
	// rollout is the staged rollout in flight: present while spec.rollout is set and the
	// workload's members are not all on its latest template.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
	// conditions: Ready, Progressing, Degraded, ReservationBound.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MemberCounts counts a fleet's members.
type MemberCounts struct {
	// desired is the size the operator is working toward.
	Desired int32 `json:"desired"`
	// current is the workload's replicas.
	Current int32 `json:"current"`
	// ready is the number of member Pods that are ready.
	Ready int32 `json:"ready"`
	// updated is the number of member Pods on the workload's current revision.
	Updated int32 `json:"updated"`
}

// RolloutStatus is a staged rollout in flight.
type RolloutStatus struct {
	// revision is the workload revision being rolled out (the StatefulSet's updateRevision, the
	// controller-revision-hash its updated members carry): the one to approve.
	Revision string `json:"revision"`
	// currentRevision is the revision the members not yet updated run.
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`
	// updated is how many members run revision.
	Updated int32 `json:"updated"`
	// total is how many members the workload has.
	Total int32 `json:"total"`
	// partition is the workload's partition: members at ordinals from it up are updated.
	Partition int32 `json:"partition"`
	// held is true while the rollout waits for a person to approve revision.
	Held bool `json:"held"`
}

// DiskAudit lists disks that carry the fleet's labels but no member uses.
type DiskAudit struct {
	// unused lists the fleet's PersistentVolumeClaims no member uses (ordinals at or above the
	// size), kept by the retention policy until the fleet grows into them or is deleted.
	// +optional
	Unused []string `json:"unused,omitempty"`
	// foreign lists PersistentVolumeClaims that carry the fleet's name but another fleet's UID;
	// the operator never adopts, uses or deletes them.
	// +optional
	Foreign []string `json:"foreign,omitempty"`
	// size is the size every claim of the fleet follows (spec.storage.size).
	// +optional
	Size string `json:"size,omitempty"`
	// claims lists each of the fleet's own claims: the size it asks for, the size it has, and
	// what holds a resize on its way.
	// +optional
	// +listType=map
	// +listMapKey=claim
	Claims []ClaimSize `json:"claims,omitempty"`
	// larger lists the fleet's claims that ask for more than spec.storage.size (someone resized
	// them by hand): kept as they are, never shrunk.
	// +optional
	Larger []string `json:"larger,omitempty"`
}

// ClaimSize is one claim's size as its PersistentVolumeClaim says.
type ClaimSize struct {
	// claim is the PersistentVolumeClaim's name.
	Claim string `json:"claim"`
	// member is the member whose disk it is; empty for a claim no member uses.
	// +optional
	Member string `json:"member,omitempty"`
	// requested is the claim's spec.resources.requests.storage.
	// +optional
	Requested string `json:"requested,omitempty"`
	// capacity is the claim's status.capacity.storage: the size of the volume as provisioned
	// or last expanded.
	// +optional
	Capacity string `json:"capacity,omitempty"`
	// resize is what holds a resize on its way: Resizing (the volume is being expanded),
	// FileSystemResizePending (the volume is larger, its filesystem not yet), or
	// ExpansionFailed; empty when none.
	// +optional
	Resize string `json:"resize,omitempty"`
	// message says what the claim reports, and what to do.
	// +optional
	Message string `json:"message,omitempty"`
}

// CelldFleetList is a list of CelldFleets.
// +kubebuilder:object:root=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CelldFleetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CelldFleet `json:"items"`
}
