package render

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// TestLongerObservedListsAreDrift: an observed list with an entry the operator does not render,
// added by hand beside the ones it does, is drift, as a changed entry is: a rule that lets
// anyone reach the members, a container that runs beside celld in every member, a port or a
// variable more. Comparing only the entries the operator renders would take the object for
// converged and never repair it.
func TestLongerObservedListsAreDrift(t *testing.T) {
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfileBucket, v1alpha1.ProfilePersistentFleet} {
		f := fleet(profile)
		objs := Render(f, 3, 3)
		policy := OfType[*networkingv1.NetworkPolicy](objs)[0]
		service := OfType[*corev1.Service](objs)[0]
		workload := workloadOf(objs)
		// What the API server and the workload controllers add is no drift: each case below
		// starts from a twin that matches.
		twin := func(o any) any {
			switch x := o.(type) {
			case *networkingv1.NetworkPolicy:
				return x.DeepCopy()
			case *corev1.Service:
				c := x.DeepCopy()
				c.Spec.ClusterIP, c.Spec.SessionAffinity = "10.0.0.7", corev1.ServiceAffinityNone
				return c
			case *appsv1.StatefulSet:
				c := x.DeepCopy()
				c.Spec.Template.Spec.DNSPolicy, c.Spec.Template.Spec.Containers[0].TerminationMessagePath = corev1.DNSClusterFirst, "/dev/termination-log"
				return c
			case *appsv1.Deployment:
				c := x.DeepCopy()
				c.Spec.Template.Spec.DNSPolicy, c.Spec.Template.Spec.Containers[0].TerminationMessagePath = corev1.DNSClusterFirst, "/dev/termination-log"
				return c
			}
			t.Fatalf("no twin for %T", o)
			return nil
		}
		template := func(o any) *corev1.PodSpec {
			if s, ok := o.(*appsv1.StatefulSet); ok {
				return &s.Spec.Template.Spec
			}
			return &o.(*appsv1.Deployment).Spec.Template.Spec
		}
		tcp := corev1.ProtocolTCP
		anyPort := intstr.FromInt32(22)
		for _, c := range []struct {
			name    string
			desired any
			edit    func(any)
		}{
			{"a rule added to a NetworkPolicy", policy, func(o any) {
				p := o.(*networkingv1.NetworkPolicy)
				p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
			}},
			{"a peer added to a NetworkPolicy's rule", policy, func(o any) {
				r := &o.(*networkingv1.NetworkPolicy).Spec.Ingress[0]
				r.From = append(r.From, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}})
			}},
			{"a port added to a NetworkPolicy's rule", policy, func(o any) {
				r := &o.(*networkingv1.NetworkPolicy).Spec.Ingress[0]
				r.Ports = append(r.Ports, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &anyPort})
			}},
			{"egress added to a NetworkPolicy's types", policy, func(o any) {
				p := o.(*networkingv1.NetworkPolicy)
				p.Spec.PolicyTypes = append(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
			}},
			{"a port added to a Service", service, func(o any) {
				s := o.(*corev1.Service)
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "ssh", Port: 22, Protocol: corev1.ProtocolTCP})
			}},
			{"a container added to the Pod template", workload, func(o any) {
				p := template(o)
				p.Containers = append(p.Containers, corev1.Container{Name: "debug", Image: "busybox"})
			}},
			{"a port added to celld's container", workload, func(o any) {
				c := &template(o).Containers[0]
				c.Ports = append(c.Ports, corev1.ContainerPort{Name: "ssh", ContainerPort: 22, Protocol: corev1.ProtocolTCP})
			}},
			{"a variable added to celld's container", workload, func(o any) {
				c := &template(o).Containers[0]
				c.Env = append(c.Env, corev1.EnvVar{Name: "CELLD_BUCKET_ENDPOINT", Value: "https://elsewhere.example"})
			}},
			{"a volume added to the Pod template", workload, func(o any) {
				p := template(o)
				p.Volumes = append(p.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
			}},
			{"a mount added to celld's container", workload, func(o any) {
				c := &template(o).Containers[0]
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "host", MountPath: "/host"})
			}},
			{"a toleration added to the Pod template", workload, func(o any) {
				p := template(o)
				p.Tolerations = append(p.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
			}},
		} {
			observed := twin(c.desired)
			if !Matches(c.desired, observed) {
				t.Fatalf("%s, %s: the twin does not match before the edit", profile, c.name)
			}
			c.edit(observed)
			if Matches(c.desired, observed) {
				t.Errorf("%s, %s: no drift", profile, c.name)
			}
		}
	}
}

// TestPlacementRemovedIsDrift: a fleet's last toleration, node selector or affinity removed from
// spec.placement must reach the members: the workload that still carries it is drift. Neither
// the API server nor the workload controllers set these in a Pod template, so one left there was
// set by the operator before, or by hand.
func TestPlacementRemovedIsDrift(t *testing.T) {
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfileBucket, v1alpha1.ProfilePersistentFleet} {
		for name, set := range map[string]func(*v1alpha1.PlacementSpec){
			"tolerations": func(p *v1alpha1.PlacementSpec) {
				p.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "storage", Effect: corev1.TaintEffectNoSchedule}}
			},
			"nodeSelector": func(p *v1alpha1.PlacementSpec) { p.NodeSelector = map[string]string{"disk": "ssd"} },
			"affinity": func(p *v1alpha1.PlacementSpec) {
				p.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}}}}}}}
			},
		} {
			f := fleet(profile)
			set(&f.Spec.Placement)
			before := workloadOf(Render(f, 3, 3))
			if !Matches(before, before) {
				t.Fatalf("%s, %s: the workload does not match itself", profile, name)
			}
			f.Spec.Placement = v1alpha1.PlacementSpec{}
			if Matches(workloadOf(Render(f, 3, 3)), before) {
				t.Errorf("%s: %s removed from spec.placement, and the workload that still has it matches", profile, name)
			}
		}
	}
}

// TestNetworkPolicyEditsThatWidenAreDrift: edits of a fleet's NetworkPolicy that let more in
// without adding an entry are drift too. An empty selector selects everything, so a client peer
// of every Pod of the namespace turned into one of every namespace, or a namespaceSelector put
// beside the peer policy's podSelector, opens the members to the cluster; on real nodes such an
// edit reached the client port from another namespace (e2e/realnodes
// TestOpenClientPolicyLetsForeignPodIn) and was never put back.
func TestNetworkPolicyEditsThatWidenAreDrift(t *testing.T) {
	f := fleet(v1alpha1.ProfilePersistentFleet)
	var clients, peers *networkingv1.NetworkPolicy
	for _, p := range OfType[*networkingv1.NetworkPolicy](Render(f, 3, 3)) {
		switch {
		case p.Name == f.Name+"-clients":
			clients = p
		case p.Name == f.Name+kinds.SuffixPeers:
			peers = p
		}
	}
	if clients == nil || peers == nil {
		t.Fatal("the fleet's two NetworkPolicies were not rendered")
	}
	for _, c := range []struct {
		name    string
		desired *networkingv1.NetworkPolicy
		edit    func(*networkingv1.NetworkPolicy)
	}{
		{"the clients' peer made every namespace", clients, func(p *networkingv1.NetworkPolicy) {
			p.Spec.Ingress[0].From = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}
		}},
		{"a namespaceSelector beside the clients' podSelector", clients, func(p *networkingv1.NetworkPolicy) {
			p.Spec.Ingress[0].From[0].NamespaceSelector = &metav1.LabelSelector{}
		}},
		{"a namespaceSelector beside the peers' podSelector", peers, func(p *networkingv1.NetworkPolicy) {
			p.Spec.Ingress[0].From[0].NamespaceSelector = &metav1.LabelSelector{}
		}},
		{"the rule's ports removed", peers, func(p *networkingv1.NetworkPolicy) { p.Spec.Ingress[0].Ports = nil }},
		{"the rule's peers removed", peers, func(p *networkingv1.NetworkPolicy) { p.Spec.Ingress[0].From = nil }},
		{"the members' selector narrowed", clients, func(p *networkingv1.NetworkPolicy) {
			p.Spec.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "nobody", Operator: metav1.LabelSelectorOpExists}}
		}},
	} {
		observed := c.desired.DeepCopy()
		// What the API server adds to the object, outside its spec, is no drift.
		observed.ResourceVersion, observed.UID, observed.Generation = "7", "u", 1
		if !Matches(c.desired, observed) {
			t.Fatalf("%s: the stored twin does not match before the edit", c.name)
		}
		c.edit(observed)
		if Matches(c.desired, observed) {
			t.Errorf("%s: no drift", c.name)
		}
	}
}

// TestEmptyDesiredMatchesAbsent: a field the desired object sets empty (a map or a list with
// nothing in it) is met by an observed object that leaves it out, as the API server drops
// empty fields from what it stores; it is not met by a value of another shape, nor by a list of
// another length. Reading an absent field as drift would write a converged fleet on every sync.
func TestEmptyDesiredMatchesAbsent(t *testing.T) {
	for _, tc := range []struct {
		name      string
		d, o      map[string]any
		subsetOfO bool
	}{
		{"empty map, absent", map[string]any{"a": map[string]any{}}, map[string]any{}, true},
		{"empty map, empty map", map[string]any{"a": map[string]any{}}, map[string]any{"a": map[string]any{}}, true},
		{"empty map, a string", map[string]any{"a": map[string]any{}}, map[string]any{"a": "x"}, false},
		{"map with a key, absent", map[string]any{"a": map[string]any{"b": "c"}}, map[string]any{}, false},
		{"empty list, absent", map[string]any{"a": []any{}}, map[string]any{}, true},
		{"empty list, a string", map[string]any{"a": []any{}}, map[string]any{"a": "x"}, false},
		{"empty list, a longer list", map[string]any{"a": []any{}}, map[string]any{"a": []any{"x"}}, false},
		{"list, absent", map[string]any{"a": []any{"x"}}, map[string]any{}, false},
		{"list, same list", map[string]any{"a": []any{"x"}}, map[string]any{"a": []any{"x"}}, true},
	} {
		if got := subset(tc.d, tc.o); got != tc.subsetOfO {
			t.Errorf("%s: subset(%v, %v) = %t, want %t", tc.name, tc.d, tc.o, got, tc.subsetOfO)
		}
	}
}
