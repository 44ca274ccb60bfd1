package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/celld/celld-operator/api/generated/informers/externalversions"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/kube"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

const (
	image = "ghcr.io/celld/celld:bench" // never pulled: kwok fakes the Pods' status
	// creators is how many requests the bench has in flight when it creates objects "at once".
	creators = 16
)

// fleetName is the i-th fleet of a run; the raw runs give their StatefulSets the same names.
func fleetName(i int) string { return fmt.Sprintf("f%04d", i) }

// newFleet is the benchmark's fleet: a PersistentFleet (an ordered StatefulSet, one retained disk
// per member), scaling in without a stabilization window so a scale-in walks as fast as the
// operator lets it. The bucket carries the namespace, which is unique to the run: a bucket stays
// reserved to its fleet cluster-wide until its reservation goes.
func newFleet(ns, name string, members int32) *v1alpha1.CelldFleet {
	return &v1alpha1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.CelldFleetSpec{
			Profile: v1alpha1.ProfilePersistentFleet,
			Members: members,
			Image:   image,
			Resources: v1alpha1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
			}},
			Storage:  &v1alpha1.StorageSpec{StorageClassName: "kwok-volume", Size: resource.MustParse("1Gi")},
			Bucket:   v1alpha1.BucketSpec{Name: ns + "-" + name, Region: "us-east-1"},
			Capacity: v1alpha1.CapacitySpec{ScaleInStabilization: &metav1.Duration{}},
		},
	}
}

// parallel runs f(0..n-1) on a few goroutines and returns the first error.
func parallel(n int, f func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan int)
	)
	for range min(creators, max(n, 1)) {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

func (b *bench) createNamespace(ctx context.Context, prefix string) (string, error) {
	name := fmt.Sprintf("%s-%s", prefix, string(uuid.NewUUID())[:6])
	_, err := b.cl.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "bench.celld.io/run": "true"},
	}}, metav1.CreateOptions{})
	return name, err
}

// deleteNamespace deletes a run's namespace and waits until it is gone, so the next run starts on
// an idle cluster. With fleets in it an operator must still run: their finalizer holds them until
// it has stopped their members and deleted their disks. A fleet still there after the timeout
// is released by hand, and reported.
func (b *bench) deleteNamespace(ctx context.Context, ns string, timeout time.Duration) error {
	err := b.cl.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	gone := func(ctx context.Context) (bool, error) {
		_, err := b.cl.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, gone)
	if err == nil {
		return nil
	}
	fleets, lerr := b.cl.celld.CelldV1alpha1().CelldFleets(ns).List(ctx, metav1.ListOptions{})
	if lerr == nil {
		for _, f := range fleets.Items {
			_, _ = b.cl.celld.CelldV1alpha1().CelldFleets(ns).Patch(ctx, f.Name, types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	}
	b.logf("namespace %s not gone %s after delete (%d fleets left, released by hand)", ns, timeout, len(fleets.Items))
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, gone)
}

func (b *bench) createFleets(ctx context.Context, ns string, from, to int, members int32) error {
	return b.createFleetsOf(ctx, ns, from, to, members, v1alpha1.ProfilePersistentFleet)
}

// createFleetsOf is createFleets with fleets of the given profile: a Bucket fleet has no claims.
func (b *bench) createFleetsOf(ctx context.Context, ns string, from, to int, members int32, profile v1alpha1.Profile) error {
	return parallel(to-from, func(i int) error {
		f := newFleet(ns, fleetName(from+i), members)
		if profile == v1alpha1.ProfileBucket {
			f.Spec.Profile, f.Spec.Storage = v1alpha1.ProfileBucket, nil
		}
		_, err := b.cl.celld.CelldV1alpha1().CelldFleets(ns).Create(ctx, f, metav1.CreateOptions{})
		return err
	})
}

// rawObjects renders n fleets exactly as the operator renders them at provisioning (render.Render,
// from the fleet as the API server defaults it, read back from a dry-run create) and strips what
// ties them to a fleet: without a fleet object, an owner reference would have the garbage
// collector delete them.
func (b *bench) rawObjects(ctx context.Context, ns string, n int, members int32) ([][]kinds.Object, error) {
	proto, err := b.cl.celld.CelldV1alpha1().CelldFleets(ns).Create(ctx, newFleet(ns, fleetName(0), members),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return nil, fmt.Errorf("dry-run create of a fleet: %w", err)
	}
	out := make([][]kinds.Object, n)
	for i := range n {
		f := proto.DeepCopy()
		f.Name = fleetName(i)
		f.UID = uuid.NewUUID()
		f.Spec.Bucket.Name = ns + "-" + f.Name
		objs := render.Render(f, members, -1).All()
		for _, o := range objs {
			m, err := apimeta.Accessor(o)
			if err != nil {
				return nil, err
			}
			m.SetOwnerReferences(nil)
		}
		out[i] = objs
	}
	return out, nil
}

func (b *bench) createRaw(ctx context.Context, ns string, objs [][]kinds.Object) error {
	return parallel(len(objs), func(i int) error {
		for _, o := range objs[i] {
			if err := kube.Create(ctx, b.cl.kube, ns, o); err != nil {
				return err
			}
		}
		return nil
	})
}

// fleetConverged is the fleet as the e2e tests call it converged: Steady, Ready, every requested
// member current and ready, all computed from the current spec.
func fleetConverged(obj any) bool {
	f, ok := obj.(*v1alpha1.CelldFleet)
	if !ok {
		return false
	}
	st := &f.Status
	return f.DeletionTimestamp == nil && st.ObservedGeneration == f.Generation && st.State == v1alpha1.StateSteady &&
		apimeta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady) &&
		st.Members.Current == f.Spec.Members && st.Members.Ready == f.Spec.Members
}

// stsReady is the floor's finish line: every replica ready, for the current spec.
func stsReady(obj any) bool {
	s, ok := obj.(*appsv1.StatefulSet)
	if !ok || s.Spec.Replicas == nil {
		return false
	}
	return s.Status.ObservedGeneration >= s.Generation && s.Status.ReadyReplicas == *s.Spec.Replicas &&
		s.Status.Replicas == *s.Spec.Replicas
}

// finishLine records, from watch events as they arrive, when each object first met a predicate.
type finishLine struct {
	mu   sync.Mutex
	pred func(any) bool
	at   map[string]time.Time
	inf  cache.SharedIndexInformer
}

func newFinishLine(inf cache.SharedIndexInformer, pred func(any) bool) (*finishLine, error) {
	fl := &finishLine{pred: pred, at: map[string]time.Time{}, inf: inf}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    fl.observe,
		UpdateFunc: func(_, n any) { fl.observe(n) },
	})
	return fl, err
}

func (fl *finishLine) observe(obj any) {
	now := time.Now()
	m, err := apimeta.Accessor(obj)
	if err != nil {
		return
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if _, done := fl.at[m.GetName()]; !done && fl.pred(obj) {
		fl.at[m.GetName()] = now
	}
}

// rearm forgets what finished and takes a new predicate; objects that meet it already count as
// finished now.
func (fl *finishLine) rearm(pred func(any) bool) {
	fl.mu.Lock()
	fl.pred, fl.at = pred, map[string]time.Time{}
	fl.mu.Unlock()
	for _, o := range fl.inf.GetStore().List() {
		fl.observe(o)
	}
}

// wait returns when n objects finished, with the time the last one did.
func (fl *finishLine) wait(ctx context.Context, n int, timeout time.Duration) (time.Time, error) {
	var last time.Time
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		if len(fl.at) < n {
			return false, nil
		}
		for _, t := range fl.at {
			if t.After(last) {
				last = t
			}
		}
		return true, nil
	})
	if err != nil {
		fl.mu.Lock()
		done := len(fl.at)
		fl.mu.Unlock()
		return time.Time{}, fmt.Errorf("%d of %d finished within %s: %w", done, n, timeout, err)
	}
	return last, nil
}

// watchers are the bench's own informers on one run's namespace, started before the run begins.
type watchers struct {
	stop   chan struct{}
	fleets cache.SharedIndexInformer
	sts    cache.SharedIndexInformer
	pods   cache.SharedIndexInformer
}

func (b *bench) watch(ctx context.Context, ns string, withPods bool) (*watchers, error) {
	w := &watchers{stop: make(chan struct{})}
	ff := externalversions.NewSharedInformerFactoryWithOptions(b.cl.celld, 0, externalversions.WithNamespace(ns))
	kf := informers.NewSharedInformerFactoryWithOptions(b.cl.kube, 0, informers.WithNamespace(ns))
	w.fleets = ff.Celld().V1alpha1().CelldFleets().Informer()
	w.sts = kf.Apps().V1().StatefulSets().Informer()
	if withPods {
		w.pods = kf.Core().V1().Pods().Informer()
		if err := w.pods.AddIndexers(cache.Indexers{"instance": func(obj any) ([]string, error) {
			if p, ok := obj.(*corev1.Pod); ok && p.Labels[kinds.LabelInstance] != "" {
				return []string{p.Labels[kinds.LabelInstance]}, nil
			}
			return nil, nil
		}}); err != nil {
			return nil, err
		}
	}
	ff.Start(w.stop)
	kf.Start(w.stop)
	synced := []cache.InformerSynced{w.fleets.HasSynced, w.sts.HasSynced}
	if w.pods != nil {
		synced = append(synced, w.pods.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		close(w.stop)
		return nil, errors.New("bench watchers did not sync")
	}
	return w, nil
}

func (w *watchers) close() { close(w.stop) }
