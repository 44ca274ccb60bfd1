package deploy_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestFlowSchemaMatchesTheOperator: the shipped FlowSchema puts every request of the operator's
// ServiceAccount (the one its Deployment runs as) on the shipped priority level, ahead of the
// built-in FlowSchema service-accounts (precedence 9000) that would otherwise take them, and
// queues them fairly by namespace. A renamed account or level would leave the operator on
// workload-low without anyone noticing.
func TestFlowSchemaMatchesTheOperator(t *testing.T) {
	type named struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name, Namespace string
		} `json:"metadata"`
	}
	read := func(file string) []byte {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var sa named
	if err := yaml.Unmarshal(read("rbac/service_account.yaml"), &sa); err != nil {
		t.Fatal(err)
	}
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					ServiceAccountName string `json:"serviceAccountName"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(read("operator/deployment.yaml"), &dep); err != nil {
		t.Fatal(err)
	}
	if got := dep.Spec.Template.Spec.ServiceAccountName; got != sa.Metadata.Name {
		t.Fatalf("the Deployment runs as %q, the ServiceAccount is %q", got, sa.Metadata.Name)
	}

	var level struct {
		named
		Spec struct {
			Type    string `json:"type"`
			Limited struct {
				NominalConcurrencyShares int `json:"nominalConcurrencyShares"`
				LendablePercent          int `json:"lendablePercent"`
				LimitResponse            struct {
					Type    string         `json:"type"`
					Queuing map[string]int `json:"queuing"`
				} `json:"limitResponse"`
			} `json:"limited"`
		} `json:"spec"`
	}
	var schema struct {
		named
		Spec struct {
			PriorityLevelConfiguration struct{ Name string } `json:"priorityLevelConfiguration"`
			MatchingPrecedence         int                   `json:"matchingPrecedence"`
			DistinguisherMethod        struct{ Type string } `json:"distinguisherMethod"`
			Rules                      []struct {
				Subjects []struct {
					Kind           string `json:"kind"`
					ServiceAccount struct {
						Name, Namespace string
					} `json:"serviceAccount"`
				} `json:"subjects"`
				ResourceRules []struct {
					Verbs, APIGroups, Resources, Namespaces []string
					ClusterScope                            bool `json:"clusterScope"`
				} `json:"resourceRules"`
				NonResourceRules []struct {
					Verbs, NonResourceURLs []string
				} `json:"nonResourceRules"`
			} `json:"rules"`
		} `json:"spec"`
	}
	docs := strings.Split(string(read("operator/flowcontrol.yaml")), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("operator/flowcontrol.yaml holds %d documents; want the priority level and the FlowSchema", len(docs))
	}
	if err := yaml.Unmarshal([]byte(docs[0]), &level); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(docs[1]), &schema); err != nil {
		t.Fatal(err)
	}
	lim := level.Spec.Limited
	if level.Kind != "PriorityLevelConfiguration" || level.Spec.Type != "Limited" || lim.NominalConcurrencyShares < 1 ||
		lim.LimitResponse.Type != "Queue" || lim.LimitResponse.Queuing["queues"] < 1 {
		t.Errorf("the priority level %+v: want a Limited level that queues", level)
	}
	s := schema.Spec
	if schema.Kind != "FlowSchema" || s.PriorityLevelConfiguration.Name != level.Metadata.Name {
		t.Errorf("the FlowSchema names priority level %q; the shipped one is %q", s.PriorityLevelConfiguration.Name, level.Metadata.Name)
	}
	if s.MatchingPrecedence < 1 || s.MatchingPrecedence >= 9000 {
		t.Errorf("matchingPrecedence %d: the built-in FlowSchema service-accounts (9000) would match the operator first", s.MatchingPrecedence)
	}
	if s.DistinguisherMethod.Type != "ByNamespace" {
		t.Errorf("distinguisher %q: want ByNamespace, one flow per namespace", s.DistinguisherMethod.Type)
	}
	if len(s.Rules) != 1 || len(s.Rules[0].Subjects) != 1 {
		t.Fatalf("rules %+v: want one rule for the operator's ServiceAccount", s.Rules)
	}
	r := s.Rules[0]
	if sub := r.Subjects[0]; sub.Kind != "ServiceAccount" || sub.ServiceAccount.Name != sa.Metadata.Name || sub.ServiceAccount.Namespace != sa.Metadata.Namespace {
		t.Errorf("the FlowSchema matches %+v; the operator is ServiceAccount %s/%s", sub, sa.Metadata.Namespace, sa.Metadata.Name)
	}
	all := []string{"*"}
	if len(r.ResourceRules) != 1 || len(r.NonResourceRules) != 1 {
		t.Fatalf("rules %+v: want every request, of resources and not", r)
	}
	rr, nr := r.ResourceRules[0], r.NonResourceRules[0]
	if !slices.Equal(rr.Verbs, all) || !slices.Equal(rr.APIGroups, all) || !slices.Equal(rr.Resources, all) ||
		!slices.Equal(rr.Namespaces, all) || !rr.ClusterScope || !slices.Equal(nr.Verbs, all) || !slices.Equal(nr.NonResourceURLs, all) {
		t.Errorf("rules %+v: want every verb of every resource, namespaced and cluster-wide, and every non-resource URL", r)
	}
}
