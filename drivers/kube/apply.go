package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
	celldlisters "github.com/celld/celld-operator/api/generated/listers/celld/v1alpha1"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/loop"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/render"
	"github.com/celld/celld-operator/reservation"
)

// FieldManager is the one field manager of everything the operator writes.
const FieldManager = kinds.FieldManager

// Applier turns the machine's actions into API requests. Each action carries its own
// preconditions; the one state it keeps between actions is the server's answer to its own last
// history append of each reservation, until the cache shows it (see appendHistory).
type Applier struct {
	// Kube and Celld send the writes that move fleets, and the fresh reads of their premises.
	Kube  kubernetes.Interface
	Celld versioned.Interface
	// Status writes the fleets' status and the reservations' capacity history; nil is Celld.
	Status   versioned.Interface
	Recorder record.EventRecorder
	// Reservations is the reservations' cache, which a history append is built on; nil reads
	// the reservation first.
	Reservations celldlisters.CelldReservationLister

	mu sync.Mutex
	// appended is the server's answer to the last history append of each reservation (by
	// namespace/name), with the resourceVersion the cache showed when it was made: kept while the
	// cache still shows that version, and no longer.
	appended map[string]appendedAnswer
	// nodes shares the premises' node reads between syncs (each only with the syncs that decided
	// before it was sent); nil reads every node on its own.
	nodes *nodeReads
	// Healed, when set, is told of every member Pod a heal deleted. A delete answered NotFound
	// holds (the Pod is gone) but deleted nothing: a sync on a cache that has not seen the first
	// delete yet, or Kubernetes' Pod collector that came first.
	Healed func(reason string)
}

// status is the client of the status writes.
func (ap *Applier) status() versioned.Interface {
	if ap.Status != nil {
		return ap.Status
	}
	return ap.Celld
}

// Target is the fleet a sync's actions are about: the cached object, replaced by what the API
// server answers to the operator's own writes to it, so a later action of the same sync (status
// after a finalizer) carries the current resourceVersion instead of conflicting with itself.
type Target = loop.Target

// Do confirms an action's premise on fresh reads, as the loop does, and applies it. A Requeue
// is the caller's: it is not an API request.
func (ap *Applier) Do(ctx context.Context, t *Target, a machine.Action) error {
	return loop.Send(ctx, applierSender{ap}, t, a)
}

// applierSender is the Applier as the loop's Sender.
type applierSender struct{ ap *Applier }

func (s applierSender) Fresh(ctx context.Context, t *Target, a machine.Action) (machine.Fresh, error) {
	start := time.Now()
	defer func() { loop.TraceFrom(ctx).Fresh(time.Since(start)) }()
	return s.ap.fresh(ctx, t, a)
}

func (s applierSender) Do(ctx context.Context, t *Target, a machine.Action) error {
	return s.ap.send(ctx, t, a)
}

// send applies one action whose premise, if any, was confirmed.
func (ap *Applier) send(ctx context.Context, t *Target, a machine.Action) error {
	return loop.Dispatch(ctx, applierWriter{ap}, t, a)
}

// applierWriter is the Applier as the loop's Writer: one API request per kind of action.
type applierWriter struct{ ap *Applier }

func (w applierWriter) Current(ctx context.Context, t *Target, a machine.Action) (metav1.Object, error) {
	return w.ap.currentFor(ctx, t, a)
}

func (w applierWriter) Apply(ctx context.Context, _ *Target, a machine.Action) (kinds.Object, error) {
	return w.ap.apply(ctx, a)
}

func (w applierWriter) BindReservation(ctx context.Context, _ *Target, a machine.Action) error {
	return w.ap.bind(ctx, a)
}

func (w applierWriter) AppendHistory(ctx context.Context, _ *Target, a machine.Action) error {
	return w.ap.appendHistory(ctx, a)
}

func (w applierWriter) SetFinalizer(ctx context.Context, t *Target, a machine.Action) error {
	return w.ap.finalizer(ctx, t, a.Kind == machine.AddFinalizer)
}

func (w applierWriter) DeletePod(ctx context.Context, _ *Target, a machine.Action) error {
	return w.ap.deletePod(ctx, a)
}

func (w applierWriter) DeleteDisk(ctx context.Context, t *Target, a machine.Action) error {
	return w.ap.deleteDisk(ctx, t, a)
}

func (w applierWriter) ResizeDisk(ctx context.Context, t *Target, a machine.Action) error {
	return w.ap.resizeDisk(ctx, t, a)
}

func (w applierWriter) RecreateWorkload(ctx context.Context, _ *Target, a machine.Action) error {
	return w.ap.recreateWorkload(ctx, a)
}

func (w applierWriter) StopWorkload(ctx context.Context, _ *Target, a machine.Action) error {
	return w.ap.stopWorkload(ctx, a)
}

func (w applierWriter) PublishStatus(ctx context.Context, t *Target, a machine.Action) error {
	return w.ap.publishStatus(ctx, t, a)
}

func (w applierWriter) RecordEvent(_ context.Context, t *Target, a machine.Action) error {
	w.ap.Recorder.Event(t.Fleet, a.EventType, a.Reason, a.Message)
	return nil
}

// apply server-side applies the rendered object with the operator's field manager, forcing
// ownership of the fields it sets: a hand edit of one of them is drift the operator repairs.
// The object carries the UID its owner check read (a.UID), which the API server holds it to.
// It returns the object as the server answered, stripped as the caches strip it.
func (ap *Applier) apply(ctx context.Context, a machine.Action) (kinds.Object, error) {
	body, err := applyBody(a.Object, a.UID)
	if err != nil {
		return nil, fmt.Errorf("apply %s: %w", a.Key, err)
	}
	force := true
	answer, err := ap.patch(ctx, a, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if apierrors.IsInvalid(err) && !kinds.IsWorkload(a.Object) && !loop.Replaced(err) {
		// A hand edit of a list the API server merges by key (a Service's ports, keyed by port
		// number) stays beside the operator's entry, and the two together can be invalid (two
		// ports named "client"): apply cannot take the edit back. The operator's spec fields
		// then replace the edited ones whole, and the object is applied again.
		if err = ap.replaceSpec(ctx, a); err == nil {
			answer, err = ap.patch(ctx, a, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("apply %s: %w", a.Key, err)
	}
	if answer != nil {
		answer.SetManagedFields(nil)
	}
	return answer, nil
}

// currentFor is the object an Apply writes as read fresh for this action: the premise's read
// when there was one (one GET serves both), a new one otherwise.
func (ap *Applier) currentFor(ctx context.Context, t *Target, a machine.Action) (metav1.Object, error) {
	if a.Key != "" && t.CurrentKey == a.Key {
		cur, _ := t.Current.(metav1.Object)
		return cur, nil
	}
	return ap.current(ctx, a)
}

// current reads the object an Apply writes from the API server, nil when it does not exist.
func (ap *Applier) current(ctx context.Context, a machine.Action) (metav1.Object, error) {
	c, name, err := ap.clientFor(a)
	if err != nil {
		return nil, err
	}
	return getOwned(ctx, c, name)
}

// getOwned is the object of that name from the API server, nil when it does not exist.
func getOwned(ctx context.Context, c objectClient, name string) (metav1.Object, error) {
	obj, err := c.get(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// patch sends one patch of the action's object.
func (ap *Applier) patch(ctx context.Context, a machine.Action, pt types.PatchType, body []byte, opts metav1.PatchOptions) (kinds.Object, error) {
	c, name, err := ap.clientFor(a)
	if err != nil {
		return nil, err
	}
	return c.patch(ctx, name, pt, body, opts)
}

// clientFor is the client of the kind of an Apply's object, in the action's namespace, and the
// object's name.
func (ap *Applier) clientFor(a machine.Action) (objectClient, string, error) {
	o, ok := a.Object.(kinds.Object)
	if !ok {
		return nil, "", fmt.Errorf("cannot apply an object of type %T", a.Object)
	}
	client, ok := ownedClients[kinds.Of(o)]
	if !ok {
		return nil, "", fmt.Errorf("cannot apply an object of type %T", a.Object)
	}
	return client.client(ap.Kube, a.Namespace), o.GetName(), nil
}

// replaceSpec sets each top-level field of the object's rendered spec whole, with a JSON patch:
// lists and maps edited by hand are replaced, not merged. Fields the operator does not render
// (a Service's allocated clusterIP) are left to the API server.
func (ap *Applier) replaceSpec(ctx context.Context, a machine.Action) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a.Object)
	if err != nil {
		return err
	}
	spec, _ := pruneNulls(u["spec"]).(map[string]any)
	keys := make([]string, 0, len(spec))
	for k := range spec {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ops := make([]map[string]any, 0, len(keys)+1)
	if a.UID != "" {
		// The same object as the apply before it, or none.
		ops = append(ops, map[string]any{"op": "test", "path": "/metadata/uid", "value": a.UID})
	}
	for _, k := range keys {
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/" + k, "value": spec[k]})
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if _, err := ap.patch(ctx, a, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		if a.UID != "" && apierrors.IsInvalid(err) {
			// A failed test answers a bare Invalid, which would read as the spec's refusal: only
			// a read tells an object replaced since the apply before.
			if cur, rerr := ap.current(ctx, a); rerr == nil && (cur == nil || cur.GetUID() != a.UID) {
				return fmt.Errorf("replace the edited spec: %s was replaced since its owner check read uid %s: %w",
					a.Ref, a.UID, machine.ErrPremiseChanged)
			}
		}
		return fmt.Errorf("replace the edited spec: %w", err)
	}
	return nil
}

// applyBody is the object as an apply configuration: without status, which an apply to the main
// resource cannot set, and without null fields (an unset creationTimestamp), which would
// otherwise become fields the operator claims to own. A uid, when given, is a precondition the
// API server enforces: an object of another UID is not written (Invalid: metadata.uid is
// immutable), nor is one created where none exists (Conflict).
func applyBody(obj any, uid types.UID) ([]byte, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(u, "status")
	if uid != "" {
		meta, _ := u["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			u["metadata"] = meta
		}
		meta["uid"] = string(uid)
	}
	return json.Marshal(pruneNulls(u))
}

func pruneNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
				continue
			}
			x[k] = pruneNulls(e)
		}
	case []any:
		for i := range x {
			x[i] = pruneNulls(x[i])
		}
	}
	return v
}

// bind creates the reservation. One that already exists is success when it binds the same fleet
// UID, and a refusal naming the fleet it binds otherwise.
func (ap *Applier) bind(ctx context.Context, a machine.Action) error {
	r, ok := a.Object.(*v1alpha1.CelldReservation)
	if !ok {
		return fmt.Errorf("bind %s: object is %T, not a CelldReservation", a.Key, a.Object)
	}
	client := ap.Celld.CelldV1alpha1().CelldReservations(r.Namespace)
	_, err := client.Create(ctx, r, metav1.CreateOptions{FieldManager: FieldManager})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind %s: %w", a.Key, err)
	}
	got, err := client.Get(ctx, r.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("bind %s: read the existing reservation: %w", a.Key, err)
	}
	if got.Spec.FleetUID != r.Spec.FleetUID {
		return fmt.Errorf("bind %s: bucket %s is reserved to fleet %s/%s (uid %s) by CelldReservation %s/%s",
			a.Key, r.Spec.Bucket.Name, got.Namespace, got.Spec.FleetName, got.Spec.FleetUID, got.Namespace, got.Name)
	}
	return nil
}

// appendHistory appends to the reservation's capacity history with optimistic concurrency, in one
// request: a merge patch of the status subresource built on the reservation as this Applier last
// knows it (its own previous append, or the cache), with that resourceVersion as precondition,
// so an append it has not seen is never overwritten. A decision already held writes nothing.
//
// Without a known reservation, or when the patch conflicts (the cache lags someone else's write)
// or is forbidden (the roles of an install older than the patch), it reads the reservation from
// the API server and updates it, reading again and retrying on a conflict. The answer to either
// write is what the next append of the same reservation is built on, until the cache shows it.
func (ap *Applier) appendHistory(ctx context.Context, a machine.Action) error {
	if len(a.Decisions) == 0 {
		return fmt.Errorf("append %s: no decision", a.Key)
	}
	client := ap.status().CelldV1alpha1().CelldReservations(a.Namespace)
	key := a.Namespace + "/" + a.Name
	r, cachedRV := ap.knownReservation(a.Namespace, a.Name)
	if r != nil && r.ResourceVersion != "" {
		h := reservation.AppendAll(r.Status.CapacityHistory, a.Decisions)
		if equality.Semantic.DeepEqual(h, r.Status.CapacityHistory) {
			return nil
		}
		body, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": r.ResourceVersion},
			"status":   map[string]any{"capacityHistory": h},
		})
		if err != nil {
			return fmt.Errorf("append %s: %w", a.Key, err)
		}
		got, err := client.Patch(ctx, a.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager}, "status")
		ap.remember(key, cachedRV, got, err)
		switch {
		case err == nil:
			return nil
		case !apierrors.IsConflict(err) && !apierrors.IsForbidden(err):
			return fmt.Errorf("append %s: %w", a.Key, err)
		}
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := client.Get(ctx, a.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		h := reservation.AppendAll(r.Status.CapacityHistory, a.Decisions)
		if equality.Semantic.DeepEqual(h, r.Status.CapacityHistory) {
			return nil
		}
		r = r.DeepCopy()
		r.Status.CapacityHistory = h
		got, err := client.UpdateStatus(ctx, r, metav1.UpdateOptions{FieldManager: FieldManager})
		ap.remember(key, cachedRV, got, err)
		return err
	})
	if err != nil {
		return fmt.Errorf("append %s: %w", a.Key, err)
	}
	return nil
}

// appendedAnswer is the server's answer to a history append, and the resourceVersion the cache
// showed when that append was made.
type appendedAnswer struct {
	answer *v1alpha1.CelldReservation
	on     string
}

// knownReservation is the reservation as this Applier last knows it, and the resourceVersion the
// cache shows ("" when it holds none): its own last append's answer while the cache still shows
// the version it showed when that append was made (the cache lags the append), the cached object
// otherwise: the cache then shows the append, or someone else's write since (a person who cleared
// the history), which the answer knows nothing of. Nil when neither holds it or there is no cache.
// The object is shared: it must not be modified.
func (ap *Applier) knownReservation(namespace, name string) (*v1alpha1.CelldReservation, string) {
	if ap.Reservations == nil {
		return nil, ""
	}
	var cached *v1alpha1.CelldReservation
	cachedRV := ""
	if r, err := ap.Reservations.CelldReservations(namespace).Get(name); err == nil {
		cached, cachedRV = r, r.ResourceVersion
	}
	key := namespace + "/" + name
	ap.mu.Lock()
	defer ap.mu.Unlock()
	mine, ok := ap.appended[key]
	switch {
	case !ok:
		return cached, cachedRV
	case cached == nil || (cached.UID == mine.answer.UID && cachedRV == mine.on):
		return mine.answer, cachedRV
	}
	delete(ap.appended, key)
	return cached, cachedRV
}

// maxAppended bounds the answers kept by remember.
const maxAppended = 256

// remember keeps the answer to a history append made while the cache showed resourceVersion on,
// and forgets what was kept when it failed: the next append then starts from the cache, or from a
// fresh read.
func (ap *Applier) remember(key, on string, got *v1alpha1.CelldReservation, err error) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	if err != nil || got == nil {
		delete(ap.appended, key)
		return
	}
	if ap.appended == nil || len(ap.appended) >= maxAppended {
		// An answer the cache never came to show (a reservation deleted since) would stay for
		// good: the memory is bounded, and an append not built on its answer only reads first.
		ap.appended = map[string]appendedAnswer{}
	}
	ap.appended[key] = appendedAnswer{answer: got, on: on}
}

// finalizer adds or removes the fleet's finalizer with a merge patch that carries the cached
// resourceVersion: the finalizer list is replaced whole, so it must be the list the operator read.
func (ap *Applier) finalizer(ctx context.Context, t *Target, add bool) error {
	f := t.Fleet
	var fins []string
	has := false
	for _, x := range f.Finalizers {
		if x == v1alpha1.FleetFinalizer {
			has = true
			if !add {
				continue
			}
		}
		fins = append(fins, x)
	}
	verb := "remove"
	if add {
		verb = "add"
		if has {
			return nil
		}
		fins = append(fins, v1alpha1.FleetFinalizer)
	} else if !has {
		return nil
	}
	if fins == nil {
		fins = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": f.ResourceVersion, "finalizers": fins,
	}})
	if err != nil {
		return err
	}
	got, err := ap.Celld.CelldV1alpha1().CelldFleets(f.Namespace).Patch(ctx, f.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager})
	if apierrors.IsNotFound(err) {
		return nil // the fleet is gone: nothing is left to protect
	}
	if err != nil {
		return fmt.Errorf("%s finalizer of %s/%s: %w", verb, f.Namespace, f.Name, err)
	}
	t.Fleet = got
	return nil
}

// fresh reads what an action's premise names, bypassing the caches: the node it was decided on,
// the members that must still be ready, the fleet's spec and the workload as the decision saw
// them. The reads that do not depend on each other go at once, and the members' nodes at once as
// soon as the members are listed, so a step waits for the slowest read, not for their sum. An
// error is the first in a fixed order: the node, the disk's members, the claim, the members and
// their nodes, the fleet, the workload.
func (ap *Applier) fresh(ctx context.Context, t *Target, a machine.Action) (machine.Fresh, error) {
	p := a.Premise
	if p == nil {
		return machine.Fresh{}, nil
	}
	var wg sync.WaitGroup
	read := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	decided := t.Decided
	readPods, readWorkload := len(p.Ready) > 0 || p.OnlyNotReady != "", p.Workload
	var (
		node        *corev1.Node
		nodeErr     error
		disk        *corev1.PersistentVolumeClaim
		members     int
		membersErr  error
		claim       *corev1.PersistentVolumeClaim
		claimErr    error
		pods        map[string]*corev1.Pod
		memberNodes []memberNode
		podsErr     error
		generation  int64
		fleetErr    error
		workload    metav1.Object
		workloadErr error
	)
	if p.Node != "" {
		read(func() {
			n, err := ap.node(ctx, p.Node, decided)
			switch {
			case err == nil:
				node = n
			case !apierrors.IsNotFound(err):
				nodeErr = fmt.Errorf("get node %s: %w", p.Node, err)
			}
		})
	}
	if p.NoMembers || p.DiskOf != "" {
		read(func() { disk, members, membersErr = ap.disk(ctx, a, p.NoMembers) })
	}
	if p.Claim != "" {
		read(func() {
			c, err := ap.Kube.CoreV1().PersistentVolumeClaims(a.Namespace).Get(ctx, p.Claim, metav1.GetOptions{})
			switch {
			case err == nil:
				claim = c
			case !apierrors.IsNotFound(err):
				claimErr = fmt.Errorf("get claim %s: %w", p.Claim, err)
			}
		})
	}
	if readPods && ap.nodes != nil {
		// The nodes the decision saw the members on, read beside the list: the members' nodes
		// read after it share these reads (sent after the decision) rather than send their own,
		// so a step waits for one round trip, not two. A member found elsewhere has its node
		// read then.
		for _, n := range p.Nodes {
			read(func() { _, _ = ap.node(ctx, n, decided) })
		}
	}
	if readPods {
		read(func() {
			pods, podsErr = ap.members(ctx, t, a)
			if podsErr == nil {
				memberNodes = ap.memberNodes(ctx, pods, decided)
			}
		})
	}
	if p.FleetGeneration != 0 {
		read(func() {
			f, err := ap.Celld.CelldV1alpha1().CelldFleets(a.Namespace).Get(ctx, p.Fleet, metav1.GetOptions{})
			switch {
			case err == nil:
				generation = f.Generation
			case !apierrors.IsNotFound(err):
				fleetErr = fmt.Errorf("get fleet %s: %w", p.Fleet, err)
			}
		})
	}
	// The workload the action writes, or the one the premise names for an action that writes
	// something else (a heal).
	writesWorkload, ref := kinds.IsWorkload(a.Object), p.WorkloadRef
	if writesWorkload {
		ref = kinds.RefOf(a.Object.(kinds.Object))
	}
	if readWorkload {
		if !kinds.IsWorkloadKind(ref.Kind) || ref.Name == "" {
			workloadErr, readWorkload = fmt.Errorf("a workload premise on a %T naming no workload (%q)", a.Object, ref), false
		} else {
			read(func() {
				cur, err := getOwned(ctx, ownedClients[ref.Kind].client(ap.Kube, a.Namespace), ref.Name)
				if err != nil {
					workloadErr = fmt.Errorf("get workload: %w", err)
					return
				}
				workload = cur
			})
		}
	}
	wg.Wait()
	for _, err := range []error{nodeErr, membersErr, claimErr, podsErr} {
		if err != nil {
			return machine.Fresh{}, err
		}
	}
	fresh := machine.Fresh{Pods: map[string]*corev1.Pod{}, Node: node, Members: members, Claim: claim, Disk: disk, FleetGeneration: generation}
	if p.DiskOf != "" && disk != nil {
		// The delete that follows carries this read's resourceVersion, once the premise
		// confirmed the claim on it.
		t.Current, t.CurrentKey = disk, a.Key
	}
	if readPods {
		fresh.Pods, fresh.MemberNodes = pods, make(map[string]*corev1.Node, len(memberNodes))
		for _, r := range memberNodes {
			name, n, err := r.name, r.node, r.err
			switch {
			case err == nil:
				fresh.MemberNodes[name] = n
			case apierrors.IsNotFound(err):
				fresh.MemberNodes[name] = nil
			default:
				return machine.Fresh{}, fmt.Errorf("get node %s of member %s: %w", name, r.member, err)
			}
		}
	}
	for _, err := range []error{fleetErr, workloadErr} {
		if err != nil {
			return machine.Fresh{}, err
		}
	}
	if readWorkload {
		if writesWorkload {
			// The apply that follows checks who owns the object on this same read.
			t.Current, t.CurrentKey = workload, a.Key
		}
		if workload != nil {
			fresh.WorkloadExists, fresh.WorkloadGeneration = true, workload.GetGeneration()
			fresh.WorkloadRolledOut = events.WorkloadOf(workload).RolledOut()
		}
	}
	return fresh, nil
}

// node reads a node for a premise decided at decided: through the reads shared between syncs
// when the Applier has them.
func (ap *Applier) node(ctx context.Context, name string, decided time.Time) (*corev1.Node, error) {
	if ap.nodes == nil {
		return ap.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	return ap.nodes.get(ctx, ap.Kube, name, decided)
}

// disk reads the claim a DeleteDisk names (nil when it does not exist) and, when members is
// true, counts the Pods of the fleet the claim belongs to: the claim's own fleet UID label names
// its members, whatever fleet the sync is about. No claim, or one without the label, has none.
func (ap *Applier) disk(ctx context.Context, a machine.Action, members bool) (*corev1.PersistentVolumeClaim, int, error) {
	pvc, err := ap.Kube.CoreV1().PersistentVolumeClaims(a.Namespace).Get(ctx, a.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("get claim %s: %w", a.Name, err)
	case !members || pvc.Labels[kinds.LabelFleetUID] == "":
		return pvc, 0, nil
	}
	list, err := ap.Kube.CoreV1().Pods(a.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: kinds.LabelFleetUID + "=" + pvc.Labels[kinds.LabelFleetUID]})
	if err != nil {
		return nil, 0, fmt.Errorf("list members: %w", err)
	}
	return pvc, len(list.Items), nil
}

// members lists the fleet's member Pods, by name.
func (ap *Applier) members(ctx context.Context, t *Target, a machine.Action) (map[string]*corev1.Pod, error) {
	list, err := ap.Kube.CoreV1().Pods(a.Namespace).List(ctx, metav1.ListOptions{LabelSelector: render.Selector(t.Fleet)})
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	pods := make(map[string]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[list.Items[i].Name] = &list.Items[i]
	}
	return pods, nil
}

// memberNode is the read of one member's node.
type memberNode struct {
	// name is the node's, member the first member by name on it.
	name, member string
	node         *corev1.Node
	err          error
}

// memberNodes reads the node of every member at once, each node once, in the order of the first
// member by name on each.
func (ap *Applier) memberNodes(ctx context.Context, pods map[string]*corev1.Pod, decided time.Time) []memberNode {
	members := make([]string, 0, len(pods))
	for name := range pods {
		members = append(members, name)
	}
	sort.Strings(members)
	var reads []memberNode
	seen := map[string]bool{}
	for _, member := range members {
		name := pods[member].Spec.NodeName
		if seen[name] || name == "" {
			continue
		}
		seen[name] = true
		reads = append(reads, memberNode{name: name, member: member})
	}
	var wg sync.WaitGroup
	for i := range reads {
		r := &reads[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.node, r.err = ap.node(ctx, r.name, decided)
		}()
	}
	wg.Wait()
	return reads
}

// deletePod deletes one member with its UID and resourceVersion as preconditions, so a Pod
// replaced or changed since the machine saw it is never the one deleted.
func (ap *Applier) deletePod(ctx context.Context, a machine.Action) error {
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &a.UID, ResourceVersion: &a.ResourceVersion}}
	if a.Force {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	err := ap.Kube.CoreV1().Pods(a.Namespace).Delete(ctx, a.Name, opts)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("delete pod %s: %w", a.Key, err)
	}
	if ap.Healed != nil {
		ap.Healed(a.Reason)
	}
	return nil
}

// deleteDisk deletes one claim with its UID and resourceVersion as preconditions: a claim
// replaced, relabelled or changed since it was confirmed is never the one deleted. The
// resourceVersion is the premise's fresh read when it confirmed the claim (the same UID, still
// the fleet's), the machine's otherwise.
// resizeDisk raises the claim's storage request with a merge patch that carries the UID and the
// resourceVersion of the fresh read its premise was confirmed on: a claim replaced, or resized by
// someone else since (perhaps past this size), is not written, and is decided on again.
func (ap *Applier) resizeDisk(ctx context.Context, t *Target, a machine.Action) error {
	c, ok := t.Current.(*corev1.PersistentVolumeClaim)
	if !ok || c == nil || t.CurrentKey != a.Key || c.UID != a.UID {
		return fmt.Errorf("resize disk %s: no fresh read of the claim confirmed it: %w", a.Key, machine.ErrPremiseChanged)
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": c.UID, "resourceVersion": c.ResourceVersion},
		"spec":     map[string]any{"resources": map[string]any{"requests": map[string]any{string(corev1.ResourceStorage): a.Size.String()}}},
	})
	if err != nil {
		return fmt.Errorf("resize disk %s: %w", a.Key, err)
	}
	_, err = ap.Kube.CoreV1().PersistentVolumeClaims(a.Namespace).Patch(ctx, a.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("resize disk %s: %w", a.Key, err)
	}
	return nil
}

// recreateWorkload deletes the StatefulSet with propagation Orphan and its UID as a
// precondition: the garbage collector takes its owner reference off its Pods and revisions and
// leaves them running, and the next step creates it again, which adopts them.
func (ap *Applier) recreateWorkload(ctx context.Context, a machine.Action) error {
	if a.UID == "" {
		return fmt.Errorf("recreate workload %s: refused without a UID precondition", a.Key)
	}
	orphan := metav1.DeletePropagationOrphan
	opts := metav1.DeleteOptions{PropagationPolicy: &orphan, Preconditions: &metav1.Preconditions{UID: &a.UID}}
	err := ap.Kube.AppsV1().StatefulSets(a.Namespace).Delete(ctx, a.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("recreate workload %s: %w", a.Key, err)
	}
	return nil
}

// stopWorkload deletes the fleet's workload with background propagation, held to the UID decided
// on: the garbage collector deletes every member Pod at once (a Deployment's through its
// ReplicaSets). The claims the StatefulSet made have no owner under its Retain/Retain policy, so
// nothing cascades to them.
func (ap *Applier) stopWorkload(ctx context.Context, a machine.Action) error {
	if a.UID == "" {
		return fmt.Errorf("stop workload %s: refused without a UID precondition", a.Key)
	}
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background, Preconditions: &metav1.Preconditions{UID: &a.UID}}
	var err error
	switch a.Ref.Kind {
	case kinds.StatefulSet:
		err = ap.Kube.AppsV1().StatefulSets(a.Namespace).Delete(ctx, a.Name, opts)
	case kinds.Deployment:
		err = ap.Kube.AppsV1().Deployments(a.Namespace).Delete(ctx, a.Name, opts)
	default:
		return fmt.Errorf("stop workload %s: %s is no workload", a.Key, a.Ref.Kind)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("stop workload %s: %w", a.Key, err)
	}
	return nil
}

func (ap *Applier) deleteDisk(ctx context.Context, t *Target, a machine.Action) error {
	if a.UID == "" || a.ResourceVersion == "" {
		return fmt.Errorf("delete disk %s: refused without both a UID and a resourceVersion precondition", a.Key)
	}
	rv := a.ResourceVersion
	if c, ok := t.Current.(*corev1.PersistentVolumeClaim); ok && c != nil && t.CurrentKey == a.Key && a.Premise != nil && a.Premise.DiskOf != "" && c.UID == a.UID {
		if c.DeletionTimestamp != nil {
			// Deleted already (a step on a cache that had not seen this delete): the action
			// holds, and another delete would only be another write.
			return nil
		}
		rv = c.ResourceVersion
	}
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &a.UID, ResourceVersion: &rv}}
	err := ap.Kube.CoreV1().PersistentVolumeClaims(a.Namespace).Delete(ctx, a.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete disk %s: %w", a.Key, err)
	}
	return nil
}

// publishStatus writes the status now, and keeps the answer as the sync's fleet so a later write
// of the same sync carries its resourceVersion. The controller does not wait on it: its driver
// hands the status to its loop.StatusWriter.
func (ap *Applier) publishStatus(ctx context.Context, t *Target, a machine.Action) error {
	if a.Status == nil {
		return fmt.Errorf("status %s: no status", a.Key)
	}
	got, err := ap.writeStatus(ctx, events.KeyOf(t.Fleet), t.Fleet.UID, a.Status)
	if err != nil {
		return fmt.Errorf("status %s: %w", a.Key, err)
	}
	if got != nil {
		t.Fleet = got
	}
	return nil
}

// writeStatus replaces the status of the fleet at key with st, and returns the server's
// answer; nil and no error when the fleet is gone (nobody reads its status).
func (ap *Applier) writeStatus(ctx context.Context, key events.FleetKey, uid types.UID, st *v1alpha1.CelldFleetStatus) (*v1alpha1.CelldFleet, error) {
	// The status is rebuilt from observation on every pass, so it replaces whatever is there
	// without a resourceVersion precondition (which would conflict with the operator's own
	// previous write whenever the cache lags it); the UID test keeps it off a fleet recreated
	// under the same name.
	body, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": uid},
		{"op": "add", "path": "/status", "value": st},
	})
	if err != nil {
		return nil, err
	}
	got, err := ap.status().CelldV1alpha1().CelldFleets(key.Namespace).Patch(ctx, key.Name, types.JSONPatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager}, "status")
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return got, nil
}
