package contract

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadAuditKeepsWhatTookSomethingAway: the audit log records every request answered, and only
// those that could have taken an object away may stand for a deletion: a dry run (in the URI or
// in the body) answers 200 and takes nothing, and a request made as another user is that user's.
func TestReadAuditKeepsWhatTookSomethingAway(t *testing.T) {
	lines := []string{
		`{"stage":"ResponseComplete","verb":"delete","requestURI":"/api/v1/namespaces/ns/pods/a?dryRun=All","user":{"username":"admin"},"objectRef":{"resource":"pods","namespace":"ns","name":"a"},"responseStatus":{"code":200},"stageTimestamp":"2026-12-06T19:27:10.240Z"}`,
		`{"stage":"ResponseComplete","verb":"delete","requestURI":"/api/v1/namespaces/ns/pods/b","user":{"username":"admin"},"objectRef":{"resource":"pods","namespace":"ns","name":"b"},"responseStatus":{"code":200},"requestObject":{"kind":"DeleteOptions","dryRun":["All"]},"stageTimestamp":"2026-12-06T19:27:10.240Z"}`,
		`{"stage":"ResponseComplete","verb":"create","requestURI":"/api/v1/namespaces/ns/pods/c/eviction?dryRun=All","user":{"username":"admin"},"objectRef":{"resource":"pods","subresource":"eviction","namespace":"ns","name":"c"},"responseStatus":{"code":201},"stageTimestamp":"2026-12-06T19:27:10.240Z"}`,
		`{"stage":"ResponseComplete","verb":"delete","requestURI":"/api/v1/namespaces/ns/pods/d","user":{"username":"admin"},"impersonatedUser":{"username":"system:node:n1"},"objectRef":{"resource":"pods","namespace":"ns","name":"d"},"responseStatus":{"code":200},"requestObject":{"kind":"DeleteOptions","gracePeriodSeconds":0,"preconditions":{"uid":"u-d"}},"stageTimestamp":"2026-12-06T19:27:11Z"}`,
		`{"stage":"ResponseComplete","verb":"create","requestURI":"/api/v1/namespaces/ns/pods/e/eviction","user":{"username":"admin"},"objectRef":{"resource":"pods","subresource":"eviction","namespace":"ns","name":"e"},"responseStatus":{"code":429},"stageTimestamp":"2026-12-06T19:27:12Z"}`,
		`{"stage":"RequestReceived","verb":"delete","requestURI":"/api/v1/namespaces/ns/pods/f","user":{"username":"admin"},"objectRef":{"resource":"pods","namespace":"ns","name":"f"},"stageTimestamp":"2026-12-06T19:27:12Z"}`,
		`{"stage":"ResponseComplete","verb":"delete","requestURI":"/api/v1/namespaces/other/pods/g","user":{"username":"admin"},"objectRef":{"resource":"pods","namespace":"other","name":"g"},"responseStatus":{"code":200},"stageTimestamp":"2026-12-06T19:27:12Z"}`,
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAudit(path, "ns")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range got {
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "d,e" {
		t.Fatalf("requests read: %v (%v); want d (a real delete) and e (a refused eviction)", names, got)
	}
	d, e := got[0], got[1]
	if d.User != "system:node:n1" || d.Eviction || d.Grace == nil || *d.Grace != 0 || d.UID != "u-d" || d.Code != 200 {
		t.Errorf("d: %+v; want the impersonated node's delete of UID u-d with grace 0, answered 200", d)
	}
	if !e.Eviction || e.Code != 429 || e.User != "admin" || e.UID != "" {
		t.Errorf("e: %+v; want admin's eviction refused with 429", e)
	}
}
