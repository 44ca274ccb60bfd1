package sim

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// The fixtures render what the operator applies the way a fleet's workload looks, without the
// machine package's renderer: these tests pin the cluster's behaviour, not the renderer's.

const ns = "prod"

// newCluster returns a cluster with nodes n1..nN, in zones a, b, c in turn, and a
// WaitForFirstConsumer storage class "standard".
func newCluster(t *testing.T, nodes int, opts Options) *Cluster {
	t.Helper()
	c := New(opts)
	for i := 1; i <= nodes; i++ {
		must(t, c.AddNode(fmt.Sprintf("n%d", i), "zone-"+string(rune('a'+(i-1)%3))))
	}
	must(t, c.AddStorageClass("standard", true))
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newFleet(t *testing.T, c *Cluster, name string, profile v1alpha1.Profile) *v1alpha1.CelldFleet {
	t.Helper()
	f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.CelldFleetSpec{Profile: profile, Members: 3, Image: "celld:v1",
			Bucket: v1alpha1.BucketSpec{Name: name + "-bucket", Region: "us-east-1"}}}
	if profile == v1alpha1.ProfilePersistentFleet {
		f.Spec.Storage = &v1alpha1.StorageSpec{StorageClassName: "standard", Size: resource.MustParse("10Gi")}
	}
	stored, err := c.CreateFleet(f)
	must(t, err)
	return stored
}

func selectorLabels(f *v1alpha1.CelldFleet) map[string]string {
	return map[string]string{kinds.LabelName: kinds.AppName, kinds.LabelInstance: f.Name, kinds.LabelFleetUID: string(f.UID)}
}

func fleetMeta(f *v1alpha1.CelldFleet, name string) metav1.ObjectMeta {
	t := true
	return metav1.ObjectMeta{Name: name, Namespace: f.Namespace, Labels: selectorLabels(f),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "celld.io/v1alpha1", Kind: "CelldFleet", Name: f.Name,
			UID: f.UID, Controller: &t, BlockOwnerDeletion: &t}}}
}

func podTemplate(f *v1alpha1.CelldFleet, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: selectorLabels(f)},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "celld", Image: image,
				VolumeMounts: []corev1.VolumeMount{{Name: kinds.DataVolume, MountPath: "/var/lib/celld"}}}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: selectorLabels(f)}}},
		},
	}
}

func statefulSet(f *v1alpha1.CelldFleet, replicas int32, image string) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: fleetMeta(f, f.Name),
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: selectorLabels(f)},
			Template: podTemplate(f, image), ServiceName: f.Name + "-peers",
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}},
	}
	if f.Spec.Storage != nil {
		sc := f.Spec.Storage.StorageClassName
		s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: kinds.DataVolume, Labels: map[string]string{kinds.LabelComponent: "disk"}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &sc, Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: f.Spec.Storage.Size}}},
		}}
		s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType}
	} else {
		s.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: kinds.DataVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}
	return s
}

func deployment(f *v1alpha1.CelldFleet, replicas int32, image string) *appsv1.Deployment {
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: fleetMeta(f, f.Name),
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: selectorLabels(f)},
			Template: podTemplate(f, image),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &zero, MaxSurge: &one}}},
	}
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: kinds.DataVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	return d
}

func prerequisites(f *v1alpha1.CelldFleet) []any {
	one := intstr.FromInt32(1)
	return []any{
		&corev1.Service{ObjectMeta: fleetMeta(f, f.Name), Spec: corev1.ServiceSpec{Selector: selectorLabels(f),
			Ports: []corev1.ServicePort{{Name: "client", Port: 7000}}}},
		&corev1.Service{ObjectMeta: fleetMeta(f, f.Name+"-peers"), Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			PublishNotReadyAddresses: true, Selector: selectorLabels(f), Ports: []corev1.ServicePort{{Name: "peer", Port: 7001}}}},
		&networkingv1.NetworkPolicy{ObjectMeta: fleetMeta(f, f.Name+"-peers"), Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selectorLabels(f)},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &one}}}}}},
		&policyv1.PodDisruptionBudget{ObjectMeta: fleetMeta(f, f.Name), Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: selectorLabels(f)}}},
	}
}

func apply(t *testing.T, c *Cluster, obj any) {
	t.Helper()
	o := obj.(object)
	must(t, c.Do(machine.Action{Kind: machine.Apply, Key: "apply/" + o.GetName(), Ref: kinds.Ref{Namespace: o.GetNamespace(), Name: o.GetName()}, Object: obj}))
}

// runFor advances the clock in 5s steps, settling after each, for d.
func runFor(c *Cluster, d time.Duration) { c.Run(d, 5*time.Second) }

// members returns the fleet's Pods by name.
func memberPods(c *Cluster, f *v1alpha1.CelldFleet) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for _, p := range c.Pods(f.Namespace) {
		if p.Labels[kinds.LabelFleetUID] == string(f.UID) {
			out[p.Name] = p
		}
	}
	return out
}

func names(pods map[string]*corev1.Pod) []string {
	var out []string
	for _, p := range sortedPods(pods) {
		out = append(out, p.Name)
	}
	return out
}

func sortedPods(pods map[string]*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, k := range sortedKeys(pods) {
		out = append(out, pods[k])
	}
	return out
}

func readyCount(pods map[string]*corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if podReady(p) && !terminating(p) {
			n++
		}
	}
	return n
}

func mustEqual[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}
