package sim

import (
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Server-side apply, simplified to what holds when the operator is the only manager of the
// fields it sends: create the object if it is missing; otherwise replace its spec, labels,
// annotations and owner references with the applied ones, keep what the server allocated
// (a Service's cluster IPs) and never touch status. Defaulting runs on the applied object as the
// API server runs it, so re-applying the same object changes nothing: no new resourceVersion,
// no generation bump, no event. Validation refuses what a real server refuses on update
// (immutable StatefulSet fields, a selector that does not select the template).

// applied is the outcome of one apply.
type applied struct {
	kind     Kind
	created  bool
	changed  bool
	previous object // nil when created
	stored   object
}

func (c *Cluster) apply(obj any, namespace string) (applied, error) {
	in, ok := obj.(object)
	if !ok {
		return applied{}, fmt.Errorf("apply: %T is not a Kubernetes object", obj)
	}
	k, ok := kindOf(obj)
	if !ok || !row(k).Owned {
		return applied{}, fmt.Errorf("apply: the operator does not apply %T", obj)
	}
	in = copyOf(in)
	if in.GetNamespace() == "" {
		in.SetNamespace(namespace)
	}
	c.defaultObject(in)
	if err := validateSelector(in); err != nil {
		return applied{}, err
	}
	cur := c.get(k, in.GetNamespace(), in.GetName())
	if cur == nil {
		if st := structField(in, "Status"); st.IsValid() {
			st.Set(reflect.Zero(st.Type()))
		}
		in.SetFinalizers(nil)
		if s, ok := in.(*corev1.Service); ok {
			c.allocateClusterIP(s)
		}
		if err := c.create(in); err != nil {
			return applied{}, err
		}
		return applied{kind: k, created: true, changed: true, stored: in}, nil
	}
	next := copyOf(cur)
	if s, ok := in.(*corev1.Service); ok {
		keepAllocated(s, cur.(*corev1.Service))
	}
	if err := validateUpdate(cur, in); err != nil {
		return applied{}, err
	}
	setContent(next, in)
	next.SetLabels(in.GetLabels())
	next.SetAnnotations(in.GetAnnotations())
	next.SetOwnerReferences(in.GetOwnerReferences())
	changed := c.put(next)
	return applied{kind: k, changed: changed, previous: cur, stored: c.get(k, in.GetNamespace(), in.GetName())}, nil
}

// setContent sets what an apply owns of next from in: every top-level field but the type, the
// metadata and the status. That is the spec of most kinds, and the data of a kind without one (a
// ConfigMap's data), so a kind is applied whatever its shape.
func setContent(next, in object) {
	dst, src := reflect.ValueOf(next).Elem(), reflect.ValueOf(in).Elem()
	for i := 0; i < dst.NumField(); i++ {
		switch dst.Type().Field(i).Name {
		case "TypeMeta", "ObjectMeta", "Status":
			continue
		}
		dst.Field(i).Set(src.Field(i))
	}
}

func (c *Cluster) allocateClusterIP(s *corev1.Service) {
	if s.Spec.Type == corev1.ServiceTypeExternalName || s.Spec.ClusterIP != "" {
		if s.Spec.ClusterIP != "" && len(s.Spec.ClusterIPs) == 0 {
			s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
		}
		return
	}
	c.ipSeq++
	s.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", c.ipSeq/250, c.ipSeq%250+1)
	s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
}

// keepAllocated gives an applied Service the cluster IPs the server allocated, which the
// operator does not manage.
func keepAllocated(in, cur *corev1.Service) {
	if in.Spec.ClusterIP == "" {
		in.Spec.ClusterIP = cur.Spec.ClusterIP
	}
	if len(in.Spec.ClusterIPs) == 0 {
		in.Spec.ClusterIPs = cur.Spec.ClusterIPs
	}
}

func invalid(obj object, errs field.ErrorList) error {
	k := mustKind(obj)
	return apierrors.NewInvalid(schema.GroupKind{Group: row(k).Resource.Group, Kind: string(k)}, obj.GetName(), errs)
}

func validateSelector(obj object) error {
	var sel *metav1.LabelSelector
	var tmpl map[string]string
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		sel, tmpl = o.Spec.Selector, o.Spec.Template.Labels
	case *appsv1.Deployment:
		sel, tmpl = o.Spec.Selector, o.Spec.Template.Labels
	default:
		return nil
	}
	p := field.NewPath("spec", "selector")
	if sel == nil {
		return invalid(obj, field.ErrorList{field.Required(p, "")})
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return invalid(obj, field.ErrorList{field.Invalid(p, sel, err.Error())})
	}
	if s.Empty() || !s.Matches(labels.Set(tmpl)) {
		return invalid(obj, field.ErrorList{field.Invalid(field.NewPath("spec", "template", "metadata", "labels"),
			tmpl, "`selector` does not match template `labels`")})
	}
	return nil
}

// validateUpdate refuses what the API server refuses to change on an existing object.
func validateUpdate(cur, in object) error {
	switch o := in.(type) {
	case *appsv1.StatefulSet:
		// Only these fields of a StatefulSet's spec may change.
		a, b := cur.(*appsv1.StatefulSet).Spec.DeepCopy(), o.Spec.DeepCopy()
		for _, s := range []*appsv1.StatefulSetSpec{a, b} {
			s.Replicas, s.Template, s.UpdateStrategy, s.PersistentVolumeClaimRetentionPolicy = nil, corev1.PodTemplateSpec{}, appsv1.StatefulSetUpdateStrategy{}, nil
			s.MinReadySeconds, s.Ordinals, s.RevisionHistoryLimit = 0, nil, nil
		}
		if !equality.Semantic.DeepEqual(a, b) {
			return invalid(in, field.ErrorList{field.Forbidden(field.NewPath("spec"),
				"updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden")})
		}
	case *appsv1.Deployment:
		if !equality.Semantic.DeepEqual(cur.(*appsv1.Deployment).Spec.Selector, o.Spec.Selector) {
			return invalid(in, field.ErrorList{field.Invalid(field.NewPath("spec", "selector"), o.Spec.Selector, "field is immutable")})
		}
	case *corev1.Service:
		if c := cur.(*corev1.Service); c.Spec.ClusterIP != o.Spec.ClusterIP && o.Spec.Type != corev1.ServiceTypeExternalName {
			return invalid(in, field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIP"), o.Spec.ClusterIP, "field is immutable")})
		}
	}
	return nil
}
