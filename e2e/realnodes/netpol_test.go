package realnodes

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// The real nodes enforce NetworkPolicies (kube-router's controller, cluster/real.sh). These tests
// judge a fleet's rendered policies on the Pods' real traffic: probe Pods, started where a client
// would be, try celld's ports and say whether they got an answer.

// helperImage is the busybox image cluster/real.sh imports into every node.
const helperImage = "celld.local/busybox:3.10"

// probeTimeout bounds one connection attempt: a port a policy closes is refused (kube-router
// rejects) or times out.
const probeTimeout = 3

// reach is what a probe Pod saw of one address: an HTTP answer of any status means the port was
// reached; a refusal, a timeout or silence means it was not.
type reach struct {
	target  string
	reached bool
	detail  string
}

// probe runs a Pod named name in namespace ns with labels, which tries each target (host:port)
// once over HTTP and resolves each name in lookups, and returns what it saw of each, in order.
func (f *fixture) probe(ns, name string, labels map[string]string, targets []string, lookups ...string) ([]reach, []string) {
	f.t.Helper()
	var script strings.Builder
	for _, t := range targets {
		host, port, _ := net.SplitHostPort(t)
		// An HTTP/1.0 request, which celld answers and closes (a TLS port answers it with a 400):
		// any answer starting "HTTP/" is the port reached; a refusal, a timeout or silence is not.
		fmt.Fprintf(&script, "out=$(printf 'GET /readyz HTTP/1.0\\r\\n\\r\\n' | timeout %d nc -w %d %s %s 2>&1 | head -c 120 | tr -d '\\r\\n'); echo \"%s ${out}\";",
			probeTimeout+3, probeTimeout, host, port, t)
	}
	for _, l := range lookups {
		fmt.Fprintf(&script, "echo \"lookup %s $(nslookup %s 2>&1 | grep -c '^Address: ')\";", l, l)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65534),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "probe", Image: helperImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", "{ " + script.String() + " } > /dev/termination-log"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	if _, err := suite.kube.CoreV1().Pods(ns).Create(f.ctx, pod, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("probe Pod %s/%s: %v", ns, name, err)
	}
	defer func() {
		_ = suite.kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}()
	var message string
	waitFor(f.t, f.ctx, "probe Pod "+ns+"/"+name+" to finish", 2*time.Minute, func() bool {
		p, err := suite.kube.CoreV1().Pods(ns).Get(f.ctx, name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			return false
		}
		message = p.Status.ContainerStatuses[0].State.Terminated.Message
		return true
	})
	var got []reach
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(message), "\n") {
		fields := strings.SplitN(line, " ", 3)
		switch {
		case len(fields) >= 2 && fields[0] == "lookup":
			names = append(names, strings.Join(fields[1:], " "))
		default:
			target, detail, _ := strings.Cut(line, " ")
			got = append(got, reach{target: target, reached: strings.HasPrefix(detail, "HTTP/"), detail: detail})
		}
	}
	if len(got) != len(targets) || len(names) != len(lookups) {
		f.t.Fatalf("probe Pod %s/%s answered %q, want a line per target %v and lookup %v", ns, name, message, targets, lookups)
	}
	return got, names
}

// probeTries bounds probeUntil's Pods.
const probeTries = 5

// probeUntil probes as probe does, with a new Pod (name-1, name-2, ...) each time, until what it
// sees of targets is want, at most probeTries times, and returns what the last one saw. Until the
// policy engine has seen a new Pod and its namespace, it lets none of its packets through: the
// engine's sync is not taken for the policy. A probe that reaches what the policies close does so
// every time, and fails.
func (f *fixture) probeUntil(ns, name string, labels map[string]string, want []bool, targets []string, lookups ...string) ([]reach, []string) {
	f.t.Helper()
	var got []reach
	var names []string
	for i := 1; i <= probeTries; i++ {
		got, names = f.probe(ns, fmt.Sprintf("%s-%d", name, i), labels, targets, lookups...)
		if slices.EqualFunc(got, want, func(r reach, w bool) bool { return r.reached == w }) {
			break
		}
	}
	return got, names
}

// expectReach checks what a probe saw against what the fleet's policies say.
func expectReach(t *testing.T, who string, got []reach, want []bool) {
	t.Helper()
	for i, r := range got {
		verdict := map[bool]string{true: "reached", false: "did not reach"}
		if r.reached != want[i] {
			t.Errorf("%s %s %s (%s); the fleet's NetworkPolicies say it should%s", who, verdict[r.reached], r.target, r.detail,
				map[bool]string{true: "", false: " not"}[want[i]])
		} else {
			t.Logf("%s %s %s (%s)", who, verdict[r.reached], r.target, strings.TrimSpace(r.detail))
		}
	}
}

// otherNamespace is a namespace of the test's besides its fleet's, removed at the end.
func (f *fixture) otherNamespace(suffix string) string {
	f.t.Helper()
	ns := f.ns + "-" + suffix
	if err := restrictedNamespace(f.ctx, ns); err != nil {
		f.t.Fatalf("namespace %s: %v", ns, err)
	}
	f.t.Cleanup(func() { _ = suite.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

// memberPorts are a member's client and peer addresses, by its Pod IP.
func memberPorts(p corev1.Pod) []string {
	return []string{net.JoinHostPort(p.Status.PodIP, "7000"), net.JoinHostPort(p.Status.PodIP, "7001")}
}

// TestNetworkPoliciesEnforcedOnRealNodes: with the policies enforced, a PersistentFleet whose
// clients are named by Pod selector and by namespace replicates on its peer port through a growth
// and a scale-in under load (0 acknowledged writes lost); its allowed clients reach the client
// port and nothing else; a Pod not allowed, in the fleet's namespace or another, reaches neither
// port; cluster DNS answers the probes; a Bucket fleet beside it reaches its bucket (Ready).
func TestNetworkPoliciesEnforcedOnRealNodes(t *testing.T) {
	f := newFixture(t)
	allowedNS := f.otherNamespace("allowed")
	foreignNS := f.otherNamespace("foreign")
	spec := f.newFleet("np", v1alpha1.ProfilePersistentFleet, 3)
	spec.Spec.Network.AllowedClients = []networkingv1.NetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}},
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: allowedNS}}},
	}
	fl := f.waitConverged(f.create(spec).Name)
	bucket := f.create(f.newFleet("npb", v1alpha1.ProfileBucket, 2))
	run := f.startLoad(fl)
	waitFor(t, f.ctx, "acknowledged writes", 2*time.Minute, func() bool { return journalLen(run) > 200 })

	member := f.members(fl)[0]
	targets := memberPorts(member)
	dns := fmt.Sprintf("%s-peers.%s.svc.cluster.local", fl.Name, f.ns)
	var wg sync.WaitGroup
	type seen struct {
		got   []reach
		names []string
	}
	results := make([]seen, 4)
	cases := []struct {
		ns, name string
		labels   map[string]string
		who      string
		want     []bool
	}{
		{f.ns, "client", map[string]string{"role": "client"}, "a Pod of the fleet's namespace labelled role=client", []bool{true, false}},
		{f.ns, "neighbour", map[string]string{"role": "other"}, "a Pod of the fleet's namespace not labelled", []bool{false, false}},
		{allowedNS, "allowed", nil, "a Pod of the namespace allowedClients names", []bool{true, false}},
		{foreignNS, "foreign", nil, "a Pod of another namespace", []bool{false, false}},
	}
	for i, c := range cases {
		wg.Go(func() { results[i].got, results[i].names = f.probeUntil(c.ns, c.name, c.labels, c.want, targets, dns) })
	}
	wg.Wait()
	for i, c := range cases {
		expectReach(t, c.who, results[i].got, c.want)
	}
	for i, r := range results {
		if r.names[0] == "" || strings.HasSuffix(r.names[0], " 0") {
			t.Errorf("probe %d: cluster DNS did not resolve %s: %q", i, dns, r.names[0])
		}
	}

	t.Log("grow 3 -> 4, then scale in 4 -> 3, under load")
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Members = 4 })
	fl = f.waitConverged(fl.Name)
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Members = 3 })
	fl = f.waitConverged(fl.Name)
	rep := f.check(fl, run)
	if len(rep.Lost) != 0 || rep.Checked == 0 {
		t.Errorf("with the policies enforced: %d of %d acknowledged writes lost", len(rep.Lost), rep.Checked)
	}
	f.waitConverged(bucket.Name)
	f.verify()
}

// TestPeerPortClosedStopsReplication is the check above made to fail: with the operator stopped,
// the fleet's peer policy is edited to open another port than celld's peer port and the members'
// processes are killed, and replication stops (no write is acknowledged, members count as not
// ready: they cannot connect to each other again) until the operator, started again,
// puts the policy back; then every acknowledged write is there. Kept: it shows the enforcement
// sees a policy that forgets the peer port.
func TestPeerPortClosedStopsReplication(t *testing.T) {
	f := newFixture(t)
	t.Cleanup(func() { scaleOperator(t, context.Background(), 2) })
	fl := f.waitConverged(f.create(f.newFleet("closed", v1alpha1.ProfilePersistentFleet, 3)).Name)
	run := f.startLoad(fl)
	waitFor(t, f.ctx, "acknowledged writes", 2*time.Minute, func() bool { return journalLen(run) > 200 })
	scaleOperator(t, f.ctx, 0)

	policies := suite.kube.NetworkingV1().NetworkPolicies(f.ns)
	wrong := intstr.FromInt32(7999)
	f.editPolicy(fl.Name+"-peers", func(p *networkingv1.NetworkPolicy) { p.Spec.Ingress[0].Ports[0].Port = &wrong })
	// A policy stops new connections; the members' open ones go on (as every engine does). Their
	// processes killed, the members start again and must connect anew, as after any restart.
	time.Sleep(5 * time.Second)
	killed := map[int]bool{}
	for name, ps := range processes(fl.UID) {
		for _, p := range ps {
			if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
				t.Fatalf("kill member %s (pid %d): %v", name, p.pid, err)
			}
			killed[p.pid] = true
		}
	}
	waitFor(t, f.ctx, "every member's celld started again", 2*time.Minute, func() bool {
		procs := processes(fl.UID)
		for _, p := range f.members(fl) {
			if ps := procs[p.Name]; len(ps) != 1 || killed[ps[0].pid] {
				return false
			}
		}
		return true
	})
	// Started again, a member on an open peer port is Ready within seconds; give it 30.
	before := journalLen(run)
	time.Sleep(30 * time.Second)
	var ready []string
	for _, p := range f.members(fl) {
		if podReady(&p) {
			ready = append(ready, p.Name)
		}
	}
	grown := journalLen(run) - before
	if grown > 0 || len(ready) > 0 {
		t.Errorf("with the peer port closed, %d writes were acknowledged and members %v came back Ready: the policy is not enforced, or celld does not need its peers", grown, ready)
	} else {
		t.Logf("peer port closed: no write acknowledged and no member Ready for 30 s after the members started again")
	}

	scaleOperator(t, f.ctx, 2)
	waitFor(t, f.ctx, "the operator to put the peer policy back", 2*time.Minute, func() bool {
		p, err := policies.Get(f.ctx, fl.Name+"-peers", metav1.GetOptions{})
		return err == nil && p.Spec.Ingress[0].Ports[0].Port.IntValue() == 7001
	})
	fl = f.waitConverged(fl.Name)
	resumed := journalLen(run)
	waitFor(t, f.ctx, "writes acknowledged again", 2*time.Minute, func() bool { return journalLen(run) > resumed+100 })
	if rep := f.check(fl, run); len(rep.Lost) != 0 {
		t.Errorf("%d of %d acknowledged writes lost", len(rep.Lost), rep.Checked)
	}
}

// TestOpenClientPolicyLetsForeignPodIn is the other check made to fail: with the operator
// stopped, the fleet's client policy is edited to allow every namespace, and a Pod of another
// namespace, refused before, reaches the client port. Kept: it shows the probe sees a policy
// that is too wide. The operator, started again, closes it.
func TestOpenClientPolicyLetsForeignPodIn(t *testing.T) {
	f := newFixture(t)
	t.Cleanup(func() { scaleOperator(t, context.Background(), 2) })
	foreignNS := f.otherNamespace("foreign")
	fl := f.waitConverged(f.create(f.newFleet("open", v1alpha1.ProfilePersistentFleet, 3)).Name)
	targets := memberPorts(f.members(fl)[0])[:1]
	got, _ := f.probe(foreignNS, "before", nil, targets)
	expectReach(t, "a Pod of another namespace, the fleet's policy as rendered", got, []bool{false})

	scaleOperator(t, f.ctx, 0)
	f.editPolicy(fl.Name+"-clients", func(p *networkingv1.NetworkPolicy) {
		p.Spec.Ingress[0].From = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}
	})
	// The engine follows the edit within its sync; probe until it does, for a bounded time.
	var open bool
	for i := 0; i < 5 && !open; i++ {
		got, _ = f.probe(foreignNS, fmt.Sprintf("open-%d", i), nil, targets)
		open = got[0].reached
	}
	if !open {
		t.Errorf("a Pod of another namespace did not reach %s with the client policy open to every namespace: the probe cannot see a policy too wide (%s)", targets[0], got[0].detail)
	}

	scaleOperator(t, f.ctx, 2)
	waitFor(t, f.ctx, "the operator to put the client policy back", 2*time.Minute, func() bool {
		p, err := suite.kube.NetworkingV1().NetworkPolicies(f.ns).Get(f.ctx, fl.Name+"-clients", metav1.GetOptions{})
		return err == nil && len(p.Spec.Ingress[0].From) == 1 && p.Spec.Ingress[0].From[0].NamespaceSelector == nil
	})
	var closed bool
	for i := 0; i < 5 && !closed; i++ {
		got, _ = f.probe(foreignNS, fmt.Sprintf("closed-%d", i), nil, targets)
		closed = !got[0].reached
	}
	if !closed {
		t.Errorf("a Pod of another namespace still reaches %s after the operator repaired the client policy", targets[0])
	}
}

func (f *fixture) editPolicy(name string, edit func(*networkingv1.NetworkPolicy)) {
	f.t.Helper()
	policies := suite.kube.NetworkingV1().NetworkPolicies(f.ns)
	for {
		p, err := policies.Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			f.t.Fatalf("NetworkPolicy %s: %v", name, err)
		}
		edit(p)
		if _, err = policies.Update(f.ctx, p, metav1.UpdateOptions{}); err == nil {
			return
		} else if !apierrors.IsConflict(err) {
			f.t.Fatalf("edit NetworkPolicy %s: %v", name, err)
		}
	}
}

// TestOperatorNetworkPolicyOnRealNodes: the chart's optional NetworkPolicy for the operator, on,
// with the metrics scraper's namespace named: a Pod of that namespace reaches the metrics port and
// not the probes' port; a Pod of another namespace reaches neither; the operator's replicas stay
// Ready (the kubelet's probes are the node's) and its leader keeps serving fleets.
func TestOperatorNetworkPolicyOnRealNodes(t *testing.T) {
	f := newFixture(t)
	monitoringNS := f.otherNamespace("monitoring")
	foreignNS := f.otherNamespace("foreign")
	chart := filepath.Join(suite.release, "celld-operator-"+strings.TrimPrefix(operatorVersion, "v")+".tgz")
	set := func(enabled bool) {
		t.Helper()
		args := []string{"upgrade", "celld-operator", chart, "--namespace", operatorNS, "--reuse-values",
			"--set", fmt.Sprintf("networkPolicy.enabled=%t", enabled), "--wait", "--timeout", "4m"}
		if enabled {
			args = append(args, "--set-json", fmt.Sprintf(`networkPolicy.metricsFrom=[{"namespaceSelector":{"matchLabels":{%q:%q}}}]`, corev1.LabelMetadataName, monitoringNS))
		}
		if _, err := helm(f.ctx, args...); err != nil {
			t.Fatalf("helm upgrade networkPolicy.enabled=%t: %v", enabled, err)
		}
	}
	set(true)
	t.Cleanup(func() { set(false) })

	// The replicas that run: a Pod that ended (Failed after its node restarted, in an earlier
	// test) keeps its address in its status until Pod garbage collection, and nothing answers
	// there.
	var pods []corev1.Pod
	waitFor(t, f.ctx, "a Ready operator Pod", 2*time.Minute, func() bool {
		l, err := suite.kube.CoreV1().Pods(operatorNS).List(f.ctx, metav1.ListOptions{LabelSelector: operatorSelector})
		if err != nil {
			return false
		}
		pods = pods[:0]
		for _, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && podReady(&p) && p.Status.PodIP != "" {
				pods = append(pods, p)
			}
		}
		return len(pods) > 0
	})
	op := pods[0]
	targets := []string{net.JoinHostPort(op.Status.PodIP, "8443"), net.JoinHostPort(op.Status.PodIP, "8081")}
	// Before the policy is in force the probes' port answers everyone: probe until the policy
	// shows as written, for a bounded time (probeUntil).
	scraper, _ := f.probeUntil(monitoringNS, "scraper", nil, []bool{true, false}, targets)
	expectReach(t, "a Pod of the namespace networkPolicy.metricsFrom names", scraper, []bool{true, false})
	other, _ := f.probeUntil(foreignNS, "foreign", nil, []bool{false, false}, targets)
	expectReach(t, "a Pod of another namespace", other, []bool{false, false})

	for _, p := range pods {
		cur, err := suite.kube.CoreV1().Pods(operatorNS).Get(f.ctx, p.Name, metav1.GetOptions{})
		if err != nil || !podReady(cur) {
			t.Errorf("operator Pod %s not Ready under its NetworkPolicy (%v)", p.Name, err)
		}
	}
	fl := f.create(f.newFleet("served", v1alpha1.ProfilePersistentFleet, 1))
	f.waitConverged(fl.Name)
}
