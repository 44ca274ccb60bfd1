package sim

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// What a person (or kubectl, HPA, KEDA) does to the cluster. Admission is reduced to the CRD's
// immutability rules and member bounds; everything else the caller is trusted to get right.

// CreateFleet creates a fleet and returns it as stored (UID, resourceVersion, generation set).
func (c *Cluster) CreateFleet(f *v1alpha1.CelldFleet) (*v1alpha1.CelldFleet, error) {
	f = f.DeepCopy()
	f.APIVersion, f.Kind = v1alpha1.SchemeGroupVersion.String(), "CelldFleet"
	f.Status = v1alpha1.CelldFleetStatus{}
	if c.uninstalling {
		return nil, fmt.Errorf("create fleet %s/%s: %w", f.Namespace, f.Name,
			apierrors.NewMethodNotSupported(row(KindFleet).Resource, "create while its CustomResourceDefinition is terminating"))
	}
	if f.Spec.Members < 1 {
		return nil, invalid(f, field.ErrorList{field.Invalid(field.NewPath("spec", "members"), f.Spec.Members, "must be at least 1")})
	}
	if err := c.create(f); err != nil {
		return nil, fmt.Errorf("create fleet %s/%s: %w", f.Namespace, f.Name, err)
	}
	return f.DeepCopy(), nil
}

// UpdateFleetSpec changes a fleet's spec through edit, refusing what the CRD's rules refuse.
func (c *Cluster) UpdateFleetSpec(namespace, name string, edit func(*v1alpha1.CelldFleetSpec)) error {
	f := c.fleet(namespace, name)
	if f == nil {
		return fmt.Errorf("update fleet %s/%s: %w", namespace, name, apierrors.NewNotFound(row(KindFleet).Resource, name))
	}
	next := f.DeepCopy()
	edit(&next.Spec)
	if errs := validateFleetUpdate(&f.Spec, &next.Spec); len(errs) > 0 {
		return fmt.Errorf("update fleet %s/%s: %w", namespace, name, invalid(f, errs))
	}
	c.put(next)
	return nil
}

func validateFleetUpdate(old, cur *v1alpha1.CelldFleetSpec) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if old.Profile != cur.Profile {
		errs = append(errs, field.Invalid(spec.Child("profile"), cur.Profile, "spec.profile is immutable: create a new CelldFleet to change profile"))
	}
	if old.Bucket != cur.Bucket {
		errs = append(errs, field.Invalid(spec.Child("bucket"), cur.Bucket, "spec.bucket is immutable: a fleet's bucket is reserved to it for life"))
	}
	if old.Workload != cur.Workload {
		errs = append(errs, field.Invalid(spec.Child("workload"), cur.Workload, "spec.workload is immutable: create a new CelldFleet to change the workload kind"))
	}
	switch o, c := old.Storage, cur.Storage; {
	case (o == nil) != (c == nil):
		errs = append(errs, field.Invalid(spec.Child("storage"), cur.Storage, "spec.storage cannot be added or removed: it follows spec.profile, which is immutable"))
	case o == nil:
	case o.StorageClassName != c.StorageClassName:
		errs = append(errs, field.Invalid(spec.Child("storage", "storageClassName"), c.StorageClassName, "spec.storage.storageClassName is immutable"))
	case c.Size.Cmp(o.Size) < 0:
		errs = append(errs, field.Invalid(spec.Child("storage", "size"), c.Size.String(), "spec.storage.size must not shrink below "+o.Size.String()))
	}
	if cur.Members < 1 {
		errs = append(errs, field.Invalid(spec.Child("members"), cur.Members, "must be at least 1"))
	}
	if old.Hibernate && cur.Hibernate && old.Members != cur.Members {
		errs = append(errs, field.Invalid(spec.Child("members"), cur.Members, "spec.members cannot change while the fleet stays hibernated (spec.hibernate true): wake the fleet first, or set spec.hibernate false and spec.members in one write"))
	}
	if cur.Rollout != nil && cur.Profile != v1alpha1.ProfilePersistentFleet && cur.Workload != v1alpha1.WorkloadOrderedStatefulSet {
		errs = append(errs, field.Invalid(spec.Child("rollout"), cur.Rollout, "spec.rollout needs a StatefulSet to hold a rollout at"))
	}
	if r := cur.Rollout; r != nil && (r.Canary < 1 || r.Canary > 1000) {
		errs = append(errs, field.Invalid(spec.Child("rollout", "canary"), r.Canary, "must be from 1 to 1000"))
	}
	return errs
}

// AnnotateFleet sets an annotation of a fleet, or removes it when value is empty, as kubectl
// annotate does: the spec and its generation stay.
func (c *Cluster) AnnotateFleet(namespace, name, key, value string) error {
	f := c.fleet(namespace, name)
	if f == nil {
		return fmt.Errorf("annotate fleet %s/%s: %w", namespace, name, apierrors.NewNotFound(row(KindFleet).Resource, name))
	}
	next := f.DeepCopy()
	if value == "" {
		delete(next.Annotations, key)
	} else {
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[key] = value
	}
	c.put(next)
	return nil
}

// SetHibernate sets spec.hibernate, as kubectl celld hibernate and wake do.
func (c *Cluster) SetHibernate(namespace, name string, hibernate bool) error {
	return c.UpdateFleetSpec(namespace, name, func(s *v1alpha1.CelldFleetSpec) { s.Hibernate = hibernate })
}

// Scale sets spec.members through the scale subresource, as kubectl scale, HPA and KEDA do.
func (c *Cluster) Scale(namespace, name string, members int32) error {
	return c.UpdateFleetSpec(namespace, name, func(s *v1alpha1.CelldFleetSpec) { s.Members = members })
}

// DeleteFleet requests a fleet's deletion: with finalizers it stays, being deleted, until they
// are removed; without, it goes and the garbage collector takes what it owns.
func (c *Cluster) DeleteFleet(namespace, name string) error {
	if _, err := c.delete(KindFleet, namespace, name, deletion{}); err != nil {
		return fmt.Errorf("delete fleet %s/%s: %w", namespace, name, err)
	}
	return nil
}

// ClearStatus empties a fleet's status, as a restore from backup or a hand edit would.
func (c *Cluster) ClearStatus(namespace, name string) error {
	f := c.fleet(namespace, name)
	if f == nil {
		return fmt.Errorf("clear status of fleet %s/%s: %w", namespace, name, apierrors.NewNotFound(row(KindFleet).Resource, name))
	}
	next := f.DeepCopy()
	next.Status = v1alpha1.CelldFleetStatus{}
	c.put(next)
	return nil
}

// Create creates any object the cluster stores, as a person would: a foreign claim, a stray Pod.
func (c *Cluster) Create(obj any) error {
	o, ok := obj.(object)
	if !ok {
		return fmt.Errorf("create %T: not a Kubernetes object", obj)
	}
	if _, ok := kindOf(obj); !ok {
		return fmt.Errorf("create %T: not a kind the cluster stores", obj)
	}
	o = copyOf(o)
	if p, ok := o.(*corev1.Pod); ok {
		c.defaultPod(p)
	} else {
		c.defaultObject(o)
	}
	if err := c.create(o); err != nil {
		return fmt.Errorf("create %s: %w", keyOf(o), err)
	}
	return nil
}

// Delete requests the deletion of any stored object, as a person would.
func (c *Cluster) Delete(k Kind, namespace, name string) error {
	if _, err := c.delete(k, namespace, name, deletion{}); err != nil {
		return fmt.Errorf("delete %s %s/%s: %w", k, namespace, name, err)
	}
	return nil
}

// ForceDelete deletes an object with a zero grace period, as `kubectl delete --force
// --grace-period=0` does: a Pod leaves the API at once, whether or not its process stopped.
func (c *Cluster) ForceDelete(k Kind, namespace, name string) error {
	if _, err := c.delete(k, namespace, name, deletion{grace: ptr(int64(0))}); err != nil {
		return fmt.Errorf("force delete %s %s/%s: %w", k, namespace, name, err)
	}
	return nil
}

// Get returns a copy of a stored object (nil when it does not exist).
func (c *Cluster) Get(k Kind, namespace, name string) any {
	if o := c.get(k, namespace, name); o != nil {
		return copyOf(o)
	}
	return nil
}

// List returns copies of the stored objects of a kind in a namespace ("" for all), by name.
func (c *Cluster) List(k Kind, namespace string) []any {
	var out []any
	for _, o := range c.list(k) {
		if namespace == "" || o.GetNamespace() == namespace {
			out = append(out, copyOf(o))
		}
	}
	return out
}

// Fleet returns a copy of a fleet, nil when it does not exist.
func (c *Cluster) Fleet(namespace, name string) *v1alpha1.CelldFleet {
	if f := c.fleet(namespace, name); f != nil {
		return f.DeepCopy()
	}
	return nil
}

// Reservation returns a copy of a reservation, nil when it does not exist.
func (c *Cluster) Reservation(namespace, name string) *v1alpha1.CelldReservation {
	r, _ := c.Get(KindReservation, namespace, name).(*v1alpha1.CelldReservation)
	return r
}

// StatefulSet returns a copy of a StatefulSet, nil when it does not exist.
func (c *Cluster) StatefulSet(namespace, name string) *appsv1.StatefulSet {
	s, _ := c.Get(KindStatefulSet, namespace, name).(*appsv1.StatefulSet)
	return s
}

// Deployment returns a copy of a Deployment, nil when it does not exist.
func (c *Cluster) Deployment(namespace, name string) *appsv1.Deployment {
	d, _ := c.Get(KindDeployment, namespace, name).(*appsv1.Deployment)
	return d
}

// Pod returns a copy of a Pod, nil when it does not exist.
func (c *Cluster) Pod(namespace, name string) *corev1.Pod {
	p, _ := c.Get(KindPod, namespace, name).(*corev1.Pod)
	return p
}

// Pods returns copies of a namespace's Pods, by name.
func (c *Cluster) Pods(namespace string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, o := range c.List(KindPod, namespace) {
		out = append(out, o.(*corev1.Pod))
	}
	return out
}

// PVC returns a copy of a claim, nil when it does not exist.
func (c *Cluster) PVC(namespace, name string) *corev1.PersistentVolumeClaim {
	p, _ := c.Get(KindPVC, namespace, name).(*corev1.PersistentVolumeClaim)
	return p
}

// PVCs returns copies of a namespace's claims, by name.
func (c *Cluster) PVCs(namespace string) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for _, o := range c.List(KindPVC, namespace) {
		out = append(out, o.(*corev1.PersistentVolumeClaim))
	}
	return out
}

// Node returns a copy of a node, nil when it does not exist.
func (c *Cluster) Node(name string) *corev1.Node {
	n, _ := c.Get(KindNode, "", name).(*corev1.Node)
	return n
}

// NodeState reports a node's health as the node lifecycle controller sees it.
func (c *Cluster) NodeState(name string) NodeState { return c.nodeState(name) }
