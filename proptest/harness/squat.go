package harness

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/drivers/sim"
)

// squat creates someone else's object, with no label and no owner, under a name the operator
// would give one of a fleet's objects.
func (w *World) squat(kind, name string) error {
	meta := metav1.ObjectMeta{Name: name, Namespace: Namespace}
	var obj any
	switch kind {
	case "Service":
		obj = &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "someone-else"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	case "PersistentVolumeClaim":
		obj = &corev1.PersistentVolumeClaim{ObjectMeta: meta, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	default:
		return fmt.Errorf("squat: no %s", kind)
	}
	w.tracef("%s someone creates %s %s/%s", w.C.Now().Format("15:04:05"), kind, Namespace, name)
	return w.C.Create(obj)
}

// exists says whether an object is there, and who controls it.
func (w *World) exists(kind, name string) string {
	o, ok := w.C.Get(sim.Kind(kind), Namespace, name).(metav1.Object)
	if !ok || o == nil {
		return fmt.Sprintf("%s/%s: gone\n", kind, name)
	}
	owner := "nobody"
	if ref := metav1.GetControllerOf(o); ref != nil {
		owner = ref.Kind + " " + ref.Name
	}
	return fmt.Sprintf("%s/%s: there (uid %s), controlled by %s\n", kind, name, o.GetUID(), owner)
}
