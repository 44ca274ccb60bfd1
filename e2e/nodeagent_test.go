package e2e

import (
	"context"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// The local control plane's kubelet is kwok, and kwok ends a terminating Pod with a DELETE by name
// and no UID precondition; it also plays its delete stage once per update event the terminating
// Pod gets, so a second DELETE, queued for the Pod it already removed, can land a few hundred
// milliseconds later on the Pod the StatefulSet controller created under the same name. A
// StatefulSet member replaced by a rollout is then deleted twice, and nobody but the fake kubelet
// is to blame. A real kubelet deletes a Pod only once it is terminating, with its UID as a
// precondition, so it can never remove the replacement. nodeAgentPolicy holds kwok to the same:
// its DELETE of a Pod that is not terminating is refused (a replacement that is itself
// terminating is going anyway), in the namespaces that carry nodeAgentLabel.
const (
	nodeAgentPolicy = "e2e.celld.io-node-agent-deletes-terminating-pods"
	nodeAgentLabel  = "e2e.celld.io/node-agent-deletes-terminating-pods"
	// kwok's user and group: the CN and O cluster/up.sh gives its client certificate.
	nodeAgentUser, nodeAgentGroup = "kwok-controller", "system:masters"
)

// nodeAgentDeletesTerminatingPodsOnly installs nodeAgentPolicy (cluster-scoped: created once,
// brought to this spec when it exists), binds it to the fixture's namespace, and proves it acts: a dry
// run of kwok's DELETE on a running member of fl is refused.
func (f *fixture) nodeAgentDeletesTerminatingPodsOnly(fl *v1alpha1.CelldFleet) {
	f.t.Helper()
	ctx, c := f.ctx, suite.kube.AdmissionregistrationV1()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: nodeAgentPolicy},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptrTo(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Delete},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			MatchConditions: []admissionv1.MatchCondition{{Name: "node-agent", Expression: `request.userInfo.username == "` + nodeAgentUser + `"`}},
			Validations: []admissionv1.Validation{{
				Expression: "has(oldObject.metadata.deletionTimestamp)",
				Message:    "the node agent removes only a Pod that is terminating, as a kubelet does with the Pod's UID as a precondition",
			}},
		},
	}
	install(f, c.ValidatingAdmissionPolicies(), policy)
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: nodeAgentPolicy},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        nodeAgentPolicy,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{nodeAgentLabel: "true"},
			}},
		},
	}
	install(f, c.ValidatingAdmissionPolicyBindings(), binding)
	patch := []byte(`{"metadata":{"labels":{"` + nodeAgentLabel + `":"true"}}}`)
	if _, err := suite.kube.CoreV1().Namespaces().Patch(ctx, f.ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		f.t.Fatalf("label namespace %s: %v", f.ns, err)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		f.t.Fatalf("node agent client: %v", err)
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: nodeAgentUser, Groups: []string{nodeAgentGroup}}
	agent, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		f.t.Fatalf("node agent client: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		members := f.members(fl)
		if len(members) == 0 {
			f.t.Fatalf("%s has no member to try the node agent's delete on", fl.Name)
		}
		p := members[0]
		err := agent.CoreV1().Pods(f.ns).Delete(ctx, p.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}, GracePeriodSeconds: ptrTo(int64(0))})
		if err != nil && strings.Contains(err.Error(), "node agent removes only") {
			f.t.Logf("the node agent's delete of running Pod %s is refused (reason %s): %v", p.Name, apierrors.ReasonForError(err), err)
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the node agent's dry-run delete of running Pod %s is not refused after 30s (policy %s): %v", p.Name, nodeAgentPolicy, err)
		}
		time.Sleep(poll)
	}
}

// clusterObjects is a typed client of one kind of cluster-scoped object.
type clusterObjects[T metav1.Object] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Get(context.Context, string, metav1.GetOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
}

// install creates obj, or replaces the one an earlier run installed, maybe of an older spec:
// this run's is the one that holds.
func install[T metav1.Object](f *fixture, c clusterObjects[T], obj T) {
	f.t.Helper()
	_, err := c.Create(f.ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var got T
		if got, err = c.Get(f.ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
			obj.SetResourceVersion(got.GetResourceVersion())
			_, err = c.Update(f.ctx, obj, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		f.t.Fatalf("install %T %s: %v", obj, obj.GetName(), err)
	}
}
