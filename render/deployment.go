package render

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/celld/celld-operator/api/v1alpha1"
)

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
