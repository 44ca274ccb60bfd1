package kube

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// CountRequests makes every client built from cfg count its requests in m, reads and writes, and
// its writes again on their own. Counting at the transport sees every request, whoever makes it
// (the workers, the informers, the event broadcaster, leader election) and every retry client-go
// makes on its own: the writes are what "a converged fleet costs zero writes" is checked against,
// the requests what "no hot loop" is.
func CountRequests(cfg *rest.Config, m *Metrics) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &requestCounter{next: rt, m: m} })
}

type requestCounter struct {
	next http.RoundTripper
	m    *Metrics
}

func (c *requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if errors.Is(err, ErrNotLeading) {
		// Never sent: GuardWrites counted it as refused.
		return resp, err
	}
	resource := resourceOf(req.URL.Path)
	// The response's code tells a refusal (403, 409, 422) and a server in trouble (429, 5xx) from
	// a success; "error" is a request that got no response (a closed connection, a timeout).
	code := "error"
	if resp != nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	if verb := writeVerb(req); verb != "" {
		c.m.writes.WithLabelValues(verb, resource).Inc()
		c.m.requests.WithLabelValues(verb, resource, code).Inc()
	} else {
		c.m.requests.WithLabelValues(readVerb(req), resource, code).Inc()
	}
	return resp, err
}

// GuardWrites makes every client built from cfg refuse to send a write while lead says this
// replica does not lead (it stands by, or lost the lease); the Lease's own requests pass. Call
// it first, so the guard sits under every other wrapper, next to the wire: a write that waited in
// a wrapper above (a retry's backoff, an injected delay) is checked when it would leave. Refused
// writes fail with ErrNotLeading and are counted in m apart from the writes sent.
func GuardWrites(cfg *rest.Config, lead *Leadership, m *Metrics) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &writeGuard{next: rt, lead: lead, m: m} })
}

type writeGuard struct {
	next http.RoundTripper
	lead *Leadership
	m    *Metrics
}

func (g *writeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if verb := writeVerb(req); verb != "" && !g.lead.isLease(req.URL.Path) && !g.lead.Leading() {
		if req.Body != nil {
			req.Body.Close()
		}
		g.m.writesRefused.WithLabelValues(verb, resourceOf(req.URL.Path)).Inc()
		return nil, fmt.Errorf("%s %s: %w", verb, req.URL.Path, ErrNotLeading)
	}
	return g.next.RoundTrip(req)
}

// requestVerb names any request the way RBAC and audit logs do.
func requestVerb(req *http.Request) string {
	if verb := writeVerb(req); verb != "" {
		return verb
	}
	return readVerb(req)
}

// readVerb names a read: watch, list (a collection) or get (one object, a subresource, discovery).
func readVerb(req *http.Request) string {
	if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
		return "watch"
	}
	if parts, ok := resourcePath(req.URL.Path); ok && len(parts) == 1 {
		return "list"
	}
	return "get"
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
	parts, ok := resourcePath(path)
	if !ok {
		return "unknown"
	}
	switch len(parts) {
	case 0:
		return "unknown"
	case 1, 2:
		return parts[0]
	}
	return parts[0] + "/" + parts[2]
}

// resourcePath is an API path past its group, version and namespace: resource[/name[/subresource]];
// false for a path outside /api and /apis (discovery, health).
func resourcePath(path string) ([]string, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return nil, false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	return parts, true
}
