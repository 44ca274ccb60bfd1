package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/e2e/contract"
)

// auditDelete is one delete of a Pod or claim as the API server recorded it (cluster/up.sh keeps
// an audit log of them): who sent it and with which options. The operator is judged on what the
// cluster recorded: a deletion a controller or kwok made is not the operator's.
type auditDelete struct {
	at    time.Time
	user  string
	agent string
	// grace is the delete's grace period, nil when it asked for none (the object's own).
	grace *int64
	// uid is the UID the delete's preconditions named, empty when it named none.
	uid  types.UID
	code int32
}

func (d auditDelete) String() string {
	g := "default"
	if d.grace != nil {
		g = fmt.Sprint(*d.grace)
	}
	return fmt.Sprintf("%s by %s (%s), grace period %s, answered %d", d.at.Format("15:04:05.000"), d.user, d.agent, g, d.code)
}

// byOperator: the operator's client sends its own user agent (cmd/celld-operator).
func (d auditDelete) byOperator() bool { return strings.HasPrefix(d.agent, "celld-operator/") }

// byKwok: kwok stands in for the kubelets; a kubelet's last word on a Pod is a delete with no
// grace period left.
func (d auditDelete) byKwok() bool { return d.user == "kwok-controller" }

// auditDeletes lists the deletes of the objects of resource ("pods", "persistentvolumeclaims")
// in the namespace that the API server answered, by object name, oldest first: one read of the
// log for every object a check looks at.
func auditDeletes(t *testing.T, resource, namespace string) map[string][]auditDelete {
	t.Helper()
	if _, err := os.Stat(suite.auditLog); err != nil {
		t.Fatalf("the API server's audit log: %v (a control plane started before cluster/up.sh kept one: restart it with cluster/down.sh; cluster/up.sh)", err)
	}
	requests, err := contract.ReadAudit(suite.auditLog, namespace)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]auditDelete{}
	for _, r := range requests {
		if !r.Eviction && r.Resource == resource {
			out[r.Name] = append(out[r.Name], auditDelete{at: r.At, user: r.User, agent: r.Agent, grace: r.Grace, uid: r.UID, code: r.Code})
		}
	}
	return out
}
