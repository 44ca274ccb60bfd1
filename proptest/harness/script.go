package harness

import (
	"bufio"

	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/render"
)

// RunScript plays a scenario script against a new world and writes the story: every command,
// every decision that did something, and what the commands asked to show. The first failed check
// or command stops the script with an error naming its line.
//
// Commands, one a line ('#' starts a comment):
//
//	nodes N                              (before anything else: the cluster's node count, default 8)
//	create NAME PROFILE members=N bucket=B [workload=W] [stabilization=D] [grace=D]
//	scale NAME N | image NAME IMAGE | delete NAME
//	run N                                (N rounds of 5s)
//	until NAME STATE [N]                 (at least one round, then until the fleet is in STATE; at most N, default 200)
//	until-ready NAME [N]                 (likewise, until the fleet is Steady and Ready at its generation)
//	gone NAME [N]                        (rounds until the fleet no longer exists)
//	lose-node NAME ORDINAL | unreachable NAME ORDINAL | fence NAME ORDINAL  (the node of that member)
//	break-image IMAGE | fix-image IMAGE | crash POD
//	lose-disk NAME ORDINAL               (the volume of that member's claim is lost)
//	follow NAME                          (a person does the step a fleet blocked in deletion names)
//	restart | resync | clear-status NAME | clear-history NAME
//	squat NAME                           (someone else's StatefulSet under that name)
//	squat Service/NAME | squat PersistentVolumeClaim/NAME  (someone else's, unlabelled, under that name)
//	exists KIND/NAME                     (whether the object is there, and whose)
//	show NAME                            (state, members, Pods, disks, reservation)
//	converged                            (liveness and idempotence)
//	writes                               (the writes the operator sent since the last writes, by verb and resource)
func RunScript(r io.Reader, out io.Writer) error {
	w := (*World)(nil)
	nodes := 8
	world := func() *World {
		if w == nil {
			w = NewWorld(nodes, 1)
			w.Trace = func(l string) { fmt.Fprintln(out, l) }
		}
		return w
	}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fmt.Fprintf(out, "> %s\n", line)
		f := strings.Fields(line)
		if f[0] == "nodes" && w == nil {
			v, err := strconv.Atoi(arg(f, 1))
			if err != nil {
				return fmt.Errorf("line %d: nodes: %w", n, err)
			}
			nodes = v
			continue
		}
		if err := command(world(), f, out); err != nil {
			return fmt.Errorf("line %d %q: %w", n, line, err)
		}
	}
	return sc.Err()
}

func arg(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

func num(s string, def int) int {
	if v, err := strconv.Atoi(s); err == nil {
		return v
	}
	return def
}

func command(w *World, f []string, out io.Writer) error {
	name := arg(f, 1)
	switch f[0] {
	case "create":
		return w.CreateFleet(parseFleet(f))
	case "scale":
		return w.Scale(name, int32(num(arg(f, 2), 0)))
	case "image":
		return w.SetImage(name, arg(f, 2))
	case "delete":
		return w.Delete(name)
	case "grow-disks":
		size, err := resource.ParseQuantity(arg(f, 2))
		if err != nil {
			return fmt.Errorf("grow-disks %s: %w", name, err)
		}
		return w.GrowDisks(name, size)
	case "forbid-expansion", "allow-expansion":
		allow := f[0] == "allow-expansion"
		return w.Fault(fmt.Sprintf("storage class %s allowVolumeExpansion=%t", StorageClass, allow), func() error { return w.C.SetVolumeExpansion(StorageClass, allow) })
	case "fail-expansion", "fix-expansion":
		fails := f[0] == "fail-expansion"
		return w.Fault(fmt.Sprintf("expanding %s fails=%t", name, fails), func() error { w.C.FailExpansion(Namespace, name, fails); return nil })
	case "offline-filesystem", "online-filesystem":
		offline := f[0] == "offline-filesystem"
		return w.Fault(fmt.Sprintf("the filesystem of %s grows offline=%t", name, offline), func() error { w.C.GrowFilesystemsOffline(Namespace, name, offline); return nil })
	case "resize-by-hand":
		size, err := resource.ParseQuantity(arg(f, 2))
		if err != nil {
			return fmt.Errorf("resize-by-hand %s: %w", name, err)
		}
		return w.Fault("someone resizes claim "+name+" to "+size.String(), func() error { return w.C.ResizeClaim(Namespace, name, size) })
	case "run":
		return w.Step(num(name, 1))
	case "until":
		state := v1alpha1.FleetState(arg(f, 2))
		return w.until(num(arg(f, 3), 200), fmt.Sprintf("%s to be %s", name, state), func() bool {
			fl := w.C.Fleet(Namespace, name)
			return fl != nil && fl.Status.State == state
		})
	case "until-ready":
		return w.until(num(arg(f, 2), 200), name+" to be Steady and Ready", func() bool {
			fl := w.C.Fleet(Namespace, name)
			// As kubectl wait and GitOps tools read it: Ready about the current spec.
			return fl != nil && fl.Status.State == v1alpha1.StateSteady && ready(fl) && fl.Status.ObservedGeneration == fl.Generation
		})
	case "gone":
		return w.until(num(arg(f, 2), 200), name+" to be gone", func() bool { return w.C.Fleet(Namespace, name) == nil })
	case "lose-node", "unreachable", "fence":
		node, err := w.memberNode(name, arg(f, 2))
		if err != nil {
			return err
		}
		switch f[0] {
		case "lose-node":
			return w.Fault("lose node "+node, func() error { return w.C.LoseNode(node) })
		case "fence":
			return w.Fault("node "+node+" fenced (out-of-service)", func() error { return w.C.FenceNode(node) })
		}
		return w.Fault("node "+node+" unreachable", func() error { return w.C.SetNodeUnreachable(node) })
	case "break-image":
		return w.Fault("image "+name+" never becomes ready", func() error { w.C.BreakImage(name); return nil })
	case "fix-image":
		return w.Fault("image "+name+" works again", func() error { w.C.FixImage(name); return nil })
	case "lose-disk":
		claim := kinds.ClaimName(name, num(arg(f, 2), -1))
		return w.Fault("volume of "+claim+" lost", func() error { return w.C.LoseDisk(Namespace, claim) })
	case "follow":
		return w.followDeletionBlocked(name)
	case "crash":
		return w.Fault("member "+name+" crashes", func() error { return w.C.CrashMember(Namespace, name) })
	case "squat":
		if kind, obj, ok := strings.Cut(name, "/"); ok {
			return w.squat(kind, obj)
		}
		// Someone else's StatefulSet under the fleet's name, with its own selector.
		labels := map[string]string{"app": "someone-else"}
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
			Spec: appsv1.StatefulSetSpec{Replicas: new(int32), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "other", Image: "other:1"}}}}}}
		w.tracef("%s someone creates StatefulSet %s/%s", w.C.Now().Format("15:04:05"), Namespace, name)
		return w.C.Create(s)
	case "restart":
		w.Restart()
		return nil
	case "resync":
		w.Resync()
		return nil
	case "clear-status":
		return w.C.ClearStatus(Namespace, name)
	case "clear-history":
		fl := w.C.Fleet(Namespace, name)
		if fl == nil {
			return fmt.Errorf("no fleet %s", name)
		}
		return w.C.ClearHistory(Namespace, render.ReservationName(fl.Spec.Bucket))
	case "show":
		fmt.Fprint(out, w.Describe(name))
		return nil
	case "show-disks":
		fmt.Fprint(out, w.describeDisks(name))
		return nil
	case "exists":
		kind, obj, _ := strings.Cut(name, "/")
		fmt.Fprint(out, w.exists(kind, obj))
		return nil
	case "writes":
		reqs := w.C.Requests()
		fmt.Fprintln(out, WritesText(reqs[min(w.writesFrom, len(reqs)):]))
		w.writesFrom = len(reqs)
		return nil
	case "converged":
		if err := w.Check.Converged(); err != nil {
			return err
		}
		fmt.Fprintln(out, "converged: every fleet Steady and Ready at its target; a full resync wrote nothing")
		return nil
	}
	return fmt.Errorf("unknown command %q", f[0])
}

func parseFleet(f []string) FleetSpec {
	s := FleetSpec{Name: arg(f, 1), Profile: v1alpha1.Profile(arg(f, 2)), Members: 3, Bucket: arg(f, 1) + "-bucket", Grace: 20 * time.Second}
	for _, kv := range f[3:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "members":
			s.Members = int32(num(v, 3))
		case "bucket":
			s.Bucket = v
		case "workload":
			s.Workload = v1alpha1.WorkloadKind(v)
		case "stabilization":
			s.Stabilization, _ = time.ParseDuration(v)
		case "grace":
			s.Grace, _ = time.ParseDuration(v)
		}
	}
	return s
}

// until steps at least once (the operator must see what the script just did), then until done.
func (w *World) until(max int, what string, done func() bool) error {
	for i := 0; i < max; i++ {
		if err := w.Step(1); err != nil {
			return err
		}
		if done() {
			return nil
		}
	}
	return fmt.Errorf("waited %d rounds for %s", max, what)
}

func (w *World) memberNode(fleet, ordinal string) (string, error) {
	p := w.C.Pod(Namespace, fleet+"-"+ordinal)
	if p == nil {
		// A Deployment's members have no ordinals: the Nth by name stands in.
		var names []string
		for _, q := range w.C.Pods(Namespace) {
			if q.Labels["app.kubernetes.io/instance"] == fleet && q.DeletionTimestamp == nil {
				names = append(names, q.Name)
			}
		}
		sort.Strings(names)
		if i, err := strconv.Atoi(ordinal); err == nil && i >= 0 && i < len(names) {
			p = w.C.Pod(Namespace, names[i])
		}
	}
	if p == nil || p.Spec.NodeName == "" {
		return "", fmt.Errorf("member %s-%s has no node", fleet, ordinal)
	}
	return p.Spec.NodeName, nil
}

// Describe renders a fleet as a person checking on it would look: state, members, Pods, disks
// and reservation.
// describeDisks shows a fleet's claims as stored (request and capacity), its members' UIDs (a
// member replaced shows a new one), its StatefulSet's UID and claim template, and what its status
// says of each claim.
func (w *World) describeDisks(name string) string {
	var b strings.Builder
	for _, c := range w.C.PVCs(Namespace) {
		if c.Labels["app.kubernetes.io/instance"] != name {
			continue
		}
		req, capa := c.Spec.Resources.Requests[corev1.ResourceStorage], c.Status.Capacity[corev1.ResourceStorage]
		fmt.Fprintf(&b, "  claim %s: requests %s, capacity %s\n", c.Name, req.String(), capa.String())
	}
	var pods []string
	for _, p := range w.C.Pods(Namespace) {
		if p.Labels["app.kubernetes.io/instance"] == name {
			pods = append(pods, p.Name+"="+string(p.UID))
		}
	}
	sort.Strings(pods)
	fmt.Fprintf(&b, "  member uids: %s\n", strings.Join(pods, " "))
	if s := w.C.StatefulSet(Namespace, name); s != nil {
		for _, t := range s.Spec.VolumeClaimTemplates {
			q := t.Spec.Resources.Requests[corev1.ResourceStorage]
			fmt.Fprintf(&b, "  statefulset uid %s: claim template %s\n", s.UID, q.String())
		}
	}
	if f := w.C.Fleet(Namespace, name); f != nil && f.Status.Disks != nil {
		d := f.Status.Disks
		fmt.Fprintf(&b, "  status: size %s, larger %v\n", d.Size, d.Larger)
		for _, c := range d.Claims {
			fmt.Fprintf(&b, "    %s (member %s): requested %s, capacity %s %s %s\n", c.Claim, c.Member, c.Requested, c.Capacity, c.Resize, c.Message)
		}
	}
	return b.String()
}

func (w *World) Describe(name string) string {
	var b strings.Builder
	f := w.C.Fleet(Namespace, name)
	if f == nil {
		fmt.Fprintf(&b, "  %s: gone\n", name)
	} else {
		s := f.Status
		fmt.Fprintf(&b, "  %s: state=%s desired=%d current=%d ready=%d ready-condition=%t", name, s.State, s.Members.Desired, s.Members.Current, s.Members.Ready, ready(f))
		if s.BlockedBy != "" {
			fmt.Fprintf(&b, " blockedBy=%q", s.BlockedBy)
		}
		b.WriteString("\n")
		for _, c := range s.Conditions {
			if c.Status == "True" && c.Type != v1alpha1.ConditionReady && c.Type != v1alpha1.ConditionReservationBound {
				fmt.Fprintf(&b, "    condition %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	var pods []string
	for _, p := range w.C.Pods(Namespace) {
		if p.Labels["app.kubernetes.io/instance"] != name {
			continue
		}
		st := "not-ready"
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				st = "ready"
			}
		}
		if p.DeletionTimestamp != nil {
			st = "terminating"
		}
		pods = append(pods, p.Name+"("+st+")")
	}
	sort.Strings(pods)
	fmt.Fprintf(&b, "  pods: %s\n", strings.Join(pods, " "))
	var disks []string
	for _, c := range w.C.PVCs(Namespace) {
		if c.Labels["app.kubernetes.io/instance"] == name {
			disks = append(disks, c.Name)
		}
	}
	sort.Strings(disks)
	fmt.Fprintf(&b, "  disks: %s\n", strings.Join(disks, " "))
	for _, o := range w.C.List(sim.KindReservation, Namespace) {
		r := o.(*v1alpha1.CelldReservation)
		if r.Spec.FleetName == name {
			fmt.Fprintf(&b, "  reservation %s: bucket=%s history=%d\n", r.Name, r.Spec.Bucket.Name, len(r.Status.CapacityHistory))
		}
	}
	return b.String()
}

// ready reports the fleet's Ready condition, as a person reading the status sees it.
// WritesText counts requests as the API server counts writes, failed ones too: by verb and
// resource, most first, with Events by reason.
func WritesText(reqs []sim.Request) string {
	by, reasons := map[string]int{}, map[string]int{}
	failed := 0
	for _, r := range reqs {
		by[r.Verb+" "+r.Resource]++
		if r.Err != nil {
			failed++
		}
		if r.Action == machine.RecordEvent {
			reasons[r.Reason]++
		}
	}
	text := func(m map[string]int) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if m[keys[i]] != m[keys[j]] {
				return m[keys[i]] > m[keys[j]]
			}
			return keys[i] < keys[j]
		})
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s %d", k, m[k])
		}
		return strings.Join(parts, ", ")
	}
	return fmt.Sprintf("writes: %d (%s); %d failed; events by reason: %s", len(reqs), text(by), failed, orText(text(reasons), "none"))
}

func ready(f *v1alpha1.CelldFleet) bool {
	for _, c := range f.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c.Status == "True"
		}
	}
	return false
}
