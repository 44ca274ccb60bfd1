package render

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

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
			ServiceName:         f.Name + kinds.SuffixPeers,
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
			ObjectMeta: metav1.ObjectMeta{Name: kinds.DataVolume, Labels: objectLabels(f, "disk")},
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
