package render

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// Container and volume layout of a member.
const (
	ContainerName = "celld"
	DataMountPath = "/var/lib/celld"
	// The root filesystem is read-only; celld's temporary files go to a scratch emptyDir of
	// ScratchLimit at ScratchMountPath.
	ScratchVolume     = "tmp"
	ScratchMountPath  = "/tmp"
	clientPortName    = "client"
	peerPortName      = "peer"
	defaultClientPort = 7000
	defaultPeerPort   = 7001
)

// DataGroup owns the members' volumes: the kubelet gives each volume to this group (group-writable,
// setgid) and adds the group to the member's process, so celld, which runs as a non-root user of
// its image's choosing, can write a freshly provisioned disk that only root could write before.
const DataGroup int64 = 65532

// ScratchLimit bounds the scratch mount: temporary files, not data, which has a volume of its own.
var ScratchLimit = resource.MustParse("256Mi")

// Objects is everything rendered for one fleet, in the order it is applied: prerequisites first,
// the workload last.
type Objects struct {
	// Owned are the objects of the owned kinds that are not workloads, in kinds.Table's order.
	Owned []kinds.Object
	// The workload, one of the two: the machine reads its size and premises from it.
	StatefulSet *appsv1.StatefulSet
	Deployment  *appsv1.Deployment
}

// Workload is the fleet's workload, whichever of the two it is.
func (o *Objects) Workload() kinds.Object {
	if o.StatefulSet != nil {
		return o.StatefulSet
	}
	return o.Deployment
}

// All lists the rendered objects in apply order.
func (o *Objects) All() []kinds.Object {
	out := make([]kinds.Object, 0, len(o.Owned)+1)
	out = append(out, o.Owned...)
	if o.StatefulSet != nil {
		out = append(out, o.StatefulSet)
	}
	if o.Deployment != nil {
		out = append(out, o.Deployment)
	}
	return out
}

// OfType lists the rendered objects of Go type T, in apply order.
func OfType[T kinds.Object](o *Objects) []T {
	var out []T
	for _, x := range o.All() {
		if t, ok := x.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// renderers render each owned kind that is not a workload; each kind's file registers its own,
// so adding a kind touches no other file of this package (TestEveryOwnedKindRenders).
var renderers = map[kinds.Kind]func(f *v1alpha1.CelldFleet) []kinds.Object{}

func register(k kinds.Kind, render func(f *v1alpha1.CelldFleet) []kinds.Object) {
	if renderers[k] != nil {
		panic("render: " + string(k) + " registered twice")
	}
	renderers[k] = render
}

// UsesStatefulSet reports whether the fleet's members run as a StatefulSet.
func UsesStatefulSet(spec *v1alpha1.CelldFleetSpec) bool {
	return spec.Profile == v1alpha1.ProfilePersistentFleet || spec.Workload == v1alpha1.WorkloadOrderedStatefulSet
}

// SelectorLabels select a fleet's members. They are immutable for the workload's life.
func SelectorLabels(f *v1alpha1.CelldFleet) map[string]string {
	return map[string]string{
		kinds.LabelName:     kinds.AppName,
		kinds.LabelInstance: f.Name,
		kinds.LabelFleetUID: string(f.UID),
	}
}

// Selector is the member selector as the scale subresource shows it.
func Selector(f *v1alpha1.CelldFleet) string {
	return labels.SelectorFromSet(SelectorLabels(f)).String()
}

func objectLabels(f *v1alpha1.CelldFleet, component string) map[string]string {
	l := SelectorLabels(f)
	l[kinds.LabelManagedBy] = kinds.ManagedBy
	l[kinds.LabelComponent] = component
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
	o := &Objects{}
	for _, r := range kinds.Owned(false) {
		render := renderers[r.Kind]
		if render == nil {
			panic("render: owned kind " + string(r.Kind) + " has no renderer")
		}
		o.Owned = append(o.Owned, render(f)...)
	}
	tmpl := renderPodTemplate(f)
	annotations := map[string]string(nil)
	if settled >= 0 {
		annotations = map[string]string{kinds.AnnotationSettled: strconv.Itoa(int(settled))}
	}
	if UsesStatefulSet(&f.Spec) {
		o.StatefulSet = renderStatefulSet(f, replicas, tmpl, annotations)
	} else {
		o.Deployment = renderDeployment(f, replicas, tmpl, annotations)
	}
	return o
}

func ptrTo[T any](v T) *T { return &v }
