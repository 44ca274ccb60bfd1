package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
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
	code  int32
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
	f, err := os.Open(suite.auditLog)
	if err != nil {
		t.Fatalf("the API server's audit log: %v (a control plane started before cluster/up.sh kept one: restart it with cluster/down.sh; cluster/up.sh)", err)
	}
	defer f.Close()
	out := map[string][]auditDelete{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var e struct {
			Stage     string `json:"stage"`
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			User      struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource, Namespace, Name string
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int32 `json:"code"`
			} `json:"responseStatus"`
			RequestObject struct {
				GracePeriodSeconds *int64 `json:"gracePeriodSeconds"`
			} `json:"requestObject"`
			StageTimestamp time.Time `json:"stageTimestamp"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log %s: %v", suite.auditLog, err)
		}
		r := &e.ObjectRef
		if e.Stage != "ResponseComplete" || e.Verb != "delete" || r.Resource != resource || r.Namespace != namespace {
			continue
		}
		out[r.Name] = append(out[r.Name], auditDelete{at: e.StageTimestamp, user: e.User.Username, agent: e.UserAgent,
			grace: e.RequestObject.GracePeriodSeconds, code: e.ResponseStatus.Code})
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("audit log %s: %v", suite.auditLog, err)
	}
	return out
}
