package kube

import (
	"net/http"
	"strings"

	"k8s.io/client-go/rest"
)

// CountWrites makes every client built from cfg count its write requests in m. Counting at the
// transport sees every write, whoever makes it (the workers, the event broadcaster, leader
// election), which is what "a converged fleet costs zero writes" is checked against.
func CountWrites(cfg *rest.Config, m *Metrics) {
	prev := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return &writeCounter{next: rt, m: m}
	}
}

type writeCounter struct {
	next http.RoundTripper
	m    *Metrics
}

func (w *writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if verb := writeVerb(req); verb != "" {
		w.m.writes.WithLabelValues(verb, resourceOf(req.URL.Path)).Inc()
	}
	return w.next.RoundTrip(req)
}

// writeVerb names a write request the way RBAC and audit logs do; "" for a read. A server-side
// apply is a PATCH, told apart by its content type.
func writeVerb(req *http.Request) string {
	switch req.Method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch") {
			return "apply"
		}
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

// resourceOf extracts resource[/subresource] from an API path:
// /api/v1/namespaces/ns/pods/name -> pods, /apis/celld.io/v1alpha1/namespaces/ns/celldfleets/x/status
// -> celldfleets/status.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "unknown"
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "unknown"
	case 1, 2:
		return parts[0]
	}
	return parts[0] + "/" + parts[2]
}
