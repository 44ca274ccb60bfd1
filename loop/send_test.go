package loop

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// recorder is a Writer that records the methods called; current is what Current answers, and
// answer and applyErr what Apply does. applied is the UID the last Apply carried.
type recorder struct {
	called   []string
	current  metav1.Object
	answer   kinds.Object
	applyErr error
	applied  types.UID
}

func (r *recorder) Current(context.Context, *Target, machine.Action) (metav1.Object, error) {
	r.called = append(r.called, "Current")
	return r.current, nil
}
func (r *recorder) rec(name string) error { r.called = append(r.called, name); return nil }
func (r *recorder) Apply(_ context.Context, _ *Target, a machine.Action) (kinds.Object, error) {
	r.applied = a.UID
	_ = r.rec("Apply")
	if r.applyErr != nil {
		return nil, r.applyErr
	}
	return r.answer, nil
}
func (r *recorder) BindReservation(context.Context, *Target, machine.Action) error {
	return r.rec("BindReservation")
}
func (r *recorder) AppendHistory(context.Context, *Target, machine.Action) error {
	return r.rec("AppendHistory")
}
func (r *recorder) SetFinalizer(context.Context, *Target, machine.Action) error {
	return r.rec("SetFinalizer")
}
func (r *recorder) DeletePod(context.Context, *Target, machine.Action) error {
	return r.rec("DeletePod")
}
func (r *recorder) DeleteDisk(context.Context, *Target, machine.Action) error {
	return r.rec("DeleteDisk")
}
func (r *recorder) ResizeDisk(context.Context, *Target, machine.Action) error {
	return r.rec("ResizeDisk")
}
func (r *recorder) RecreateWorkload(context.Context, *Target, machine.Action) error {
	return r.rec("RecreateWorkload")
}
func (r *recorder) StopWorkload(context.Context, *Target, machine.Action) error {
	return r.rec("StopWorkload")
}
func (r *recorder) PublishStatus(context.Context, *Target, machine.Action) error {
	return r.rec("PublishStatus")
}
func (r *recorder) RecordEvent(context.Context, *Target, machine.Action) error {
	return r.rec("RecordEvent")
}

// TestDispatchRoutesEveryKind: each kind of action reaches its own request, and nothing else.
func TestDispatchRoutesEveryKind(t *testing.T) {
	for kind, want := range map[machine.ActionKind]string{
		machine.BindReservation: "BindReservation", machine.AppendHistory: "AppendHistory",
		machine.AddFinalizer: "SetFinalizer", machine.RemoveFinalizer: "SetFinalizer",
		machine.DeletePod: "DeletePod", machine.DeleteDisk: "DeleteDisk",
		machine.PublishStatus: "PublishStatus", machine.RecordEvent: "RecordEvent",
	} {
		r := &recorder{}
		if err := Dispatch(context.Background(), r, &Target{}, machine.Action{Kind: kind, Key: "k"}); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if len(r.called) != 1 || r.called[0] != want {
			t.Errorf("%s called %v, want [%s]", kind, r.called, want)
		}
	}
	size := resource.MustParse("2Gi")
	for kind, a := range map[string]machine.Action{
		"ResizeDisk": {Kind: machine.ResizeDisk, Key: "k", UID: "c1", Size: size, Premise: &machine.Premise{Fleet: "a", FleetGeneration: 3, DiskOf: "f1", DiskUID: "c1", DiskBelow: &size}},
		"RecreateWorkload": {Kind: machine.RecreateWorkload, Key: "k", UID: "s1",
			Premise: &machine.Premise{Workload: true, WorkloadExists: true, RolledOut: true}},
		"StopWorkload": {Kind: machine.StopWorkload, Key: "k", UID: "s1", Premise: &machine.Premise{Fleet: "a", FleetGeneration: 3}},
	} {
		r := &recorder{}
		if err := Dispatch(context.Background(), r, &Target{}, a); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if len(r.called) != 1 || r.called[0] != kind {
			t.Errorf("%s called %v, want [%s]", kind, r.called, kind)
		}
	}
	r := &recorder{}
	if err := Dispatch(context.Background(), r, &Target{}, machine.Action{Kind: machine.Requeue}); err != nil || len(r.called) != 0 {
		t.Errorf("a requeue: %v, called %v; want nothing sent", err, r.called)
	}
	if err := Dispatch(context.Background(), r, &Target{}, machine.Action{Kind: "Launch"}); err == nil || len(r.called) != 0 {
		t.Errorf("an unknown kind: %v, called %v; want an error and nothing sent", err, r.called)
	}
}

// TestCheckRefusesAForceDeleteOnANodeThatMayBeAlive: only a premise that names the node and says
// it is gone or fenced lets a force-delete through; a graceful delete needs neither.
func TestCheckRefusesAForceDeleteOnANodeThatMayBeAlive(t *testing.T) {
	for _, c := range []struct {
		name    string
		force   bool
		premise *machine.Premise
		sent    bool
	}{
		{"graceful, no premise", false, nil, true},
		{"force, no premise", true, nil, false},
		{"force, no node named", true, &machine.Premise{NodeGone: true}, false},
		{"force, node unreachable", true, &machine.Premise{Node: "n1"}, false},
		{"force, node gone", true, &machine.Premise{Node: "n1", NodeGone: true}, true},
		{"force, node fenced", true, &machine.Premise{Node: "n1", NodeFenced: true}, true},
	} {
		r := &recorder{}
		err := Dispatch(context.Background(), r, &Target{}, machine.Action{Kind: machine.DeletePod, Key: "heal/a-1", Force: c.force, Premise: c.premise})
		if sent := len(r.called) == 1 && err == nil; sent != c.sent {
			t.Errorf("%s: sent %v (err %v), want %v", c.name, sent, err, c.sent)
		}
	}
}

// TestCheckNeverAppliesOverSomeoneElsesObject: an Apply writes only an absent object or one the
// rendered object's controller controls; anything else is a changed premise, and nothing is sent.
func TestCheckNeverAppliesOverSomeoneElsesObject(t *testing.T) {
	yes := true
	ctl := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "celld.io/v1alpha1", Kind: "CelldFleet", Name: "alpha", UID: uid, Controller: &yes}}
	}
	rendered := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "alpha", OwnerReferences: ctl("uid-alpha")}}
	for _, c := range []struct {
		name    string
		current metav1.Object
		object  any
		sent    bool
		changed bool
	}{
		{"absent", nil, rendered, true, false},
		{"the fleet's own", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "alpha", OwnerReferences: ctl("uid-alpha")}}, rendered, true, false},
		{"no controller", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}}, rendered, false, true},
		{"another fleet's", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "alpha", OwnerReferences: ctl("uid-before")}}, rendered, false, true},
		{"rendered with no controller", nil, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}}, false, false},
		{"not an object", nil, "alpha", false, false},
	} {
		answer := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "alpha", ResourceVersion: "9"}}
		r := &recorder{current: c.current, answer: answer}
		tg := &Target{}
		err := Dispatch(context.Background(), r, tg, machine.Action{Kind: machine.Apply, Key: "apply/Service/alpha", Object: c.object})
		sent := len(r.called) > 0 && r.called[len(r.called)-1] == "Apply"
		if sent != c.sent || (err == nil) != c.sent || errors.Is(err, machine.ErrPremiseChanged) != c.changed {
			t.Errorf("%s: sent %v, err %v; want sent %v, a changed premise %v", c.name, sent, err, c.sent, c.changed)
		}
		// The server's answer goes back to the loop, which decides on it while the caches lag.
		if answered := len(tg.Answers) == 1 && tg.Answers[0] == kinds.Object(answer); answered != c.sent || len(tg.Answers) > 1 {
			t.Errorf("%s: answers %v; want the writer's answer exactly when the Apply was sent", c.name, tg.Answers)
		}
	}
}

// TestApplyCarriesTheUIDItsOwnerCheckRead: the owner check's read and the write are two
// requests; the write carries the UID the check read, so the API server refuses it on an object
// deleted or replaced in between. Refused because the object was replaced (Invalid on
// metadata.uid), it is a changed premise the next sync retries, not the spec's refusal, which
// would hold the fleet until its spec changed; deleted (a Conflict), it is retried as any
// Conflict.
func TestApplyCarriesTheUIDItsOwnerCheckRead(t *testing.T) {
	yes := true
	ctl := []metav1.OwnerReference{{APIVersion: "celld.io/v1alpha1", Kind: "CelldFleet", Name: "alpha", UID: "uid-alpha", Controller: &yes}}
	rendered := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "alpha", OwnerReferences: ctl}}
	own := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "alpha", UID: "uid-svc", OwnerReferences: ctl}}
	gk := schema.GroupKind{Kind: "Service"}
	replaced := apierrors.NewInvalid(gk, "alpha", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "uid-svc", "field is immutable")})
	deleted := apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "alpha",
		errors.New("uid mismatch: the provided object specified uid uid-svc, and no existing object was found"))
	spec := apierrors.NewInvalid(gk, "alpha", field.ErrorList{field.Duplicate(field.NewPath("spec", "ports").Index(1).Child("name"), "client")})
	for _, c := range []struct {
		name     string
		current  metav1.Object
		applyErr error
		uid      types.UID
		changed  bool
		check    func(error) bool
	}{
		{"absent: nothing to hold it to", nil, nil, "", false, func(err error) bool { return err == nil }},
		{"the fleet's own", own, nil, "uid-svc", false, func(err error) bool { return err == nil }},
		{"replaced since the check", own, replaced, "uid-svc", true, func(err error) bool { return !apierrors.IsInvalid(err) }},
		{"deleted since the check", own, deleted, "uid-svc", false, apierrors.IsConflict},
		{"refused for its spec", own, spec, "uid-svc", false, apierrors.IsInvalid},
	} {
		r := &recorder{current: c.current, answer: rendered, applyErr: c.applyErr}
		err := Dispatch(context.Background(), r, &Target{}, machine.Action{Kind: machine.Apply, Key: "apply/Service/alpha", Object: rendered})
		if r.applied != c.uid {
			t.Errorf("%s: the apply carried uid %q, want %q", c.name, r.applied, c.uid)
		}
		if errors.Is(err, machine.ErrPremiseChanged) != c.changed || !c.check(err) {
			t.Errorf("%s: error %v; want a changed premise %v", c.name, err, c.changed)
		}
	}
}

// scripted is a Sender whose fresh reads and requests answer in turn from its scripts; it counts
// both.
type scripted struct {
	reads    []machine.Fresh
	answers  []error
	freshes  int
	requests int
}

func (s *scripted) Fresh(context.Context, *Target, machine.Action) (machine.Fresh, error) {
	f := s.reads[min(s.freshes, len(s.reads)-1)]
	s.freshes++
	return f, nil
}

func (s *scripted) Do(context.Context, *Target, machine.Action) error {
	err := s.answers[min(s.requests, len(s.answers)-1)]
	s.requests++
	return err
}

// TestSendConfirmsAgainOnAConflict: a request that meets a Conflict (someone wrote the object
// since the fresh read its preconditions carry) is confirmed again on a new read and sent once
// more; a premise the new read refutes sends nothing more, a second Conflict is the caller's, and
// an action with no premise, or a failure that is no Conflict, is never sent twice.
func TestSendConfirmsAgainOnAConflict(t *testing.T) {
	const fleet = types.UID("f-1")
	claim := func(uid types.UID, owner types.UID) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-pf-3", UID: uid,
			Labels: map[string]string{kinds.LabelFleetUID: string(owner)}}}
	}
	mine := machine.Fresh{Disk: claim("c-1", fleet)}
	relabelled := machine.Fresh{Disk: claim("c-1", "someone-else")}
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "persistentvolumeclaims"}, "data-pf-3",
		errors.New("the object has been modified"))
	disk := machine.Action{Kind: machine.DeleteDisk, Key: "team/pf/disk/data-pf-3",
		Premise: &machine.Premise{NoMembers: true, DiskOf: fleet, DiskUID: "c-1"}}
	unconfirmed := disk
	unconfirmed.Premise = nil
	cases := []struct {
		name              string
		a                 machine.Action
		reads             []machine.Fresh
		answers           []error
		freshes, requests int
		want              error // nil, or what the error must be
	}{
		{"a conflict, confirmed again", disk, []machine.Fresh{mine}, []error{conflict, nil}, 2, 2, nil},
		{"a conflict, and the new read refutes the premise", disk, []machine.Fresh{mine, relabelled}, []error{conflict, nil}, 2, 1, machine.ErrPremiseChanged},
		{"two conflicts", disk, []machine.Fresh{mine}, []error{conflict, conflict, nil}, 2, 2, conflict},
		{"a failure that is no conflict", disk, []machine.Fresh{mine}, []error{errBoom, nil}, 1, 1, errBoom},
		{"a conflict on an action with no premise", unconfirmed, []machine.Fresh{mine}, []error{conflict, nil}, 0, 1, conflict},
		{"sent at once", disk, []machine.Fresh{mine}, []error{nil}, 1, 1, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &scripted{reads: c.reads, answers: c.answers}
			err := Send(context.Background(), s, &Target{}, c.a)
			if s.freshes != c.freshes || s.requests != c.requests {
				t.Errorf("%d fresh reads and %d requests, want %d and %d", s.freshes, s.requests, c.freshes, c.requests)
			}
			switch {
			case c.want == nil && err != nil:
				t.Errorf("Send: %v, want no error", err)
			case c.want != nil && !errors.Is(err, c.want):
				t.Errorf("Send: %v, want %v", err, c.want)
			}
		})
	}
}

var errBoom = errors.New("connection reset")

// TestCheckRefusesUnconfirmedResizes: a claim is resized only on a premise that it is the fleet's
// own and asks for less than the size, and a StatefulSet deleted to be created again only on one
// that it rolled out; without either, Dispatch sends nothing.
func TestCheckRefusesUnconfirmedResizes(t *testing.T) {
	size, other := resource.MustParse("2Gi"), resource.MustParse("1Gi")
	for name, a := range map[string]machine.Action{
		"a resize without a premise":            {Kind: machine.ResizeDisk, Key: "k", UID: "c1", Size: size},
		"a resize of no fleet's claim":          {Kind: machine.ResizeDisk, Key: "k", UID: "c1", Size: size, Premise: &machine.Premise{Fleet: "a", FleetGeneration: 3, DiskUID: "c1", DiskBelow: &size}},
		"a resize of another claim":             {Kind: machine.ResizeDisk, Key: "k", UID: "c1", Size: size, Premise: &machine.Premise{Fleet: "a", FleetGeneration: 3, DiskOf: "f1", DiskUID: "c2", DiskBelow: &size}},
		"a resize with no bound below":          {Kind: machine.ResizeDisk, Key: "k", UID: "c1", Size: size, Premise: &machine.Premise{Fleet: "a", FleetGeneration: 3, DiskOf: "f1", DiskUID: "c1"}},
		"a resize past what the premise bounds": {Kind: machine.ResizeDisk, Key: "k", UID: "c1", Size: size, Premise: &machine.Premise{Fleet: "a", FleetGeneration: 3, DiskOf: "f1", DiskUID: "c1", DiskBelow: &other}},
		// A deletion (the fleet's, or its CRD's at uninstall) raises the generation: a resize not
		// held to it could grow a deleted fleet's claims.
		"a resize not held to a generation":  {Kind: machine.ResizeDisk, Key: "k", UID: "c1", Size: size, Premise: &machine.Premise{Fleet: "a", DiskOf: "f1", DiskUID: "c1", DiskBelow: &size}},
		"a resize of no named fleet":         {Kind: machine.ResizeDisk, Key: "k", UID: "c1", Size: size, Premise: &machine.Premise{FleetGeneration: 3, DiskOf: "f1", DiskUID: "c1", DiskBelow: &size}},
		"a recreate without a UID":           {Kind: machine.RecreateWorkload, Key: "k", Premise: &machine.Premise{Workload: true, WorkloadExists: true, RolledOut: true}},
		"a recreate of a workload in motion": {Kind: machine.RecreateWorkload, Key: "k", UID: "s1", Premise: &machine.Premise{Workload: true, WorkloadExists: true}},
		"a recreate without a premise":       {Kind: machine.RecreateWorkload, Key: "k", UID: "s1"},
		"a stop without a UID":               {Kind: machine.StopWorkload, Key: "k", Premise: &machine.Premise{Fleet: "a", FleetGeneration: 3}},
		"a stop without a premise":           {Kind: machine.StopWorkload, Key: "k", UID: "s1"},
		"a stop not held to a generation":    {Kind: machine.StopWorkload, Key: "k", UID: "s1", Premise: &machine.Premise{Fleet: "a"}},
	} {
		r := &recorder{}
		if err := Dispatch(context.Background(), r, &Target{}, a); err == nil || len(r.called) != 0 {
			t.Errorf("%s: err %v, called %v; want a refusal and nothing sent", name, err, r.called)
		}
	}
}
