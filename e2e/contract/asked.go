package contract

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Request is one request to take an object away, as the API server's audit log recorded it: a
// Pod's eviction (a create of the pods/eviction subresource, what a drain sends, which the
// disruption budget may refuse) or a delete (what the operator sends to heal a member or remove
// a disk, and what controllers and kubelets send).
type Request struct {
	At time.Time
	// Resource is the object's API resource: pods, persistentvolumeclaims.
	Resource, Namespace, Name string
	Eviction                  bool
	User, Agent               string
	// Grace is a delete's grace period, nil when it asked for none (the object's own).
	Grace *int64
	// UID is the UID a delete's preconditions named, empty when it named none: a delete by name
	// alone takes whichever object holds the name when it arrives.
	UID types.UID
	// Code is the API server's answer: 2xx when it took the object away, 429 when the budget
	// refused an eviction.
	Code int32
}

func (r Request) String() string {
	verb := "delete"
	if r.Eviction {
		verb = "eviction"
	}
	return fmt.Sprintf("%s by %s (%s) at %s", verb, r.User, r.Agent, r.At.Format("15:04:05.000"))
}

// ByOperator: the operator's client names itself in its user agent (cmd/celld-operator).
func (r Request) ByOperator() bool { return strings.HasPrefix(r.Agent, "celld-operator/") }

// ReadAudit reads the Pod evictions and the deletes of namespace ns that an API server's JSON
// audit log recorded once answered (cluster/up.sh's audit policy records Pod evictions, and
// deletes of Pods and claims).
func ReadAudit(path, ns string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the API server's audit log: %w", err)
	}
	defer f.Close()
	var out []Request
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var e struct {
			Stage      string `json:"stage"`
			Verb       string `json:"verb"`
			UserAgent  string `json:"userAgent"`
			RequestURI string `json:"requestURI"`
			User       struct {
				Username string `json:"username"`
			} `json:"user"`
			ImpersonatedUser *struct {
				Username string `json:"username"`
			} `json:"impersonatedUser"`
			ObjectRef struct {
				Resource, Subresource, Namespace, Name string
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int32 `json:"code"`
			} `json:"responseStatus"`
			RequestObject struct {
				GracePeriodSeconds *int64   `json:"gracePeriodSeconds"`
				DryRun             []string `json:"dryRun"`
				Preconditions      struct {
					UID *types.UID `json:"uid"`
				} `json:"preconditions"`
			} `json:"requestObject"`
			StageTimestamp time.Time `json:"stageTimestamp"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log %s: %w", path, err)
		}
		o := &e.ObjectRef
		if e.Stage != "ResponseComplete" || o.Namespace != ns {
			continue
		}
		eviction := e.Verb == "create" && o.Resource == "pods" && o.Subresource == "eviction"
		if !eviction && (e.Verb != "delete" || o.Subresource != "") {
			continue
		}
		// A dry run takes nothing away, and answers 200 as the real request would: were it kept,
		// it could stand for a deletion that someone else asked for moments later.
		if len(e.RequestObject.DryRun) > 0 || dryRunURI(e.RequestURI) {
			continue
		}
		r := Request{At: e.StageTimestamp, Resource: o.Resource, Namespace: o.Namespace, Name: o.Name, Eviction: eviction,
			User: e.User.Username, Agent: e.UserAgent, Code: e.ResponseStatus.Code}
		// Whoever a request was made as is who asked for it, not the one allowed to impersonate.
		if e.ImpersonatedUser != nil && e.ImpersonatedUser.Username != "" {
			r.User = e.ImpersonatedUser.Username
		}
		if !eviction {
			r.Grace = e.RequestObject.GracePeriodSeconds
			if u := e.RequestObject.Preconditions.UID; u != nil {
				r.UID = *u
			}
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit log %s: %w", path, err)
	}
	return out, nil
}

// dryRunURI: the dryRun query parameter of a request's URI (an eviction or a delete can carry
// it there as well as in its body).
func dryRunURI(uri string) bool {
	u, err := url.ParseRequestURI(uri)
	return err == nil && len(u.Query()["dryRun"]) > 0
}

// The audit log and the watches stamp one write at different moments: the log when the answer
// is sent, the recorder when the event arrives, either first. A request is matched to the first
// deletion of a Pod of its name seen within these bounds of it.
const (
	askedBefore = 5 * time.Second
	askedAfter  = 2 * time.Second
)

// askedFor attributes the first deletion of each Pod to the request that asked for it: the
// earliest answered request for the Pod's name made after that Pod was first seen (an earlier
// one was for a Pod of the same name before it) and within the bounds of the deletion. A Pod
// no request matches keeps no attribution.
func askedFor(h []Entry, requests []Request) map[types.UID]Request {
	reqs := append([]Request(nil), requests...)
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].At.Before(reqs[j].At) })
	used := make([]bool, len(reqs))
	out := map[types.UID]Request{}
	firstSeen := map[types.UID]time.Time{}
	terminating := map[types.UID]bool{}
	for _, e := range h {
		p, ok := e.Obj.(*corev1.Pod)
		if !ok {
			continue
		}
		if _, seen := firstSeen[p.UID]; !seen {
			firstSeen[p.UID] = e.At
		}
		if e.Initial || terminating[p.UID] || (e.Type != watch.Deleted && p.DeletionTimestamp == nil) {
			continue
		}
		terminating[p.UID] = true
		from := e.At.Add(-askedBefore)
		if firstSeen[p.UID].After(from) {
			from = firstSeen[p.UID]
		}
		for i, r := range reqs {
			if used[i] || r.Code < 200 || r.Code > 299 || r.Resource != "pods" || r.Namespace != p.Namespace || r.Name != p.Name || r.At.Before(from) {
				continue
			}
			if r.At.After(e.At.Add(askedAfter)) {
				break
			}
			used[i] = true
			out[p.UID] = r
			break
		}
	}
	return out
}
