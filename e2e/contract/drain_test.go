package contract

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestDrainEvictions: the judge tells a drain's evictions from the operator's deletes by the
// audit log's record of each. A drain that takes one member at a time, lets a member that is not
// Ready go while every other is Ready, or evicts while a scale-in's member leaves, keeps the
// contract; an eviction, of a Ready member or not, while another member is away or not Ready
// breaks the drain's clause. The operator's delete of a
// member is still clause 3's, as is an eviction the log does not show, and a request made for a
// Pod of the same name before it existed is not its.
func TestDrainEvictions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		story func(h *history)
		want  [][]string
		// evicted is how many deletions must be put down to an eviction.
		evicted int
	}{
		{"one member at a time, each back before the next", func(h *history) {
			h.evict(1)
			h.replace(1, "n9")
			h.evict(2)
			h.replace(2, "n1")
		}, nil, 2},
		{"an eviction while another member is away", func(h *history) {
			h.evict(1)
			h.evict(2)
		}, [][]string{{"drain: Pod pf-2", "evicted (eviction by admin", "while 1 other member(s) of its fleet were away: 9 wanted"}}, 2},
		{"an eviction while another member is not Ready", func(h *history) {
			h.setReady(3, false)
			h.evict(2)
		}, [][]string{{"drain: Pod pf-2", "not ready or terminating [pf-3]"}}, 1},
		{"a member that is not Ready evicted, every other Ready", func(h *history) {
			h.setReady(3, false)
			h.evict(3)
		}, nil, 1},
		{"a member that is not Ready evicted while another is away", func(h *history) {
			h.setReady(3, false)
			h.setReady(4, false)
			h.evict(3)
		}, [][]string{{"drain: Pod pf-3", "while 1 other member(s) of its fleet were away", "not ready or terminating [pf-4]"}}, 1},
		{"an eviction while a scale-in's member leaves", func(h *history) {
			h.step(8)
			p := h.pods[8].DeepCopy()
			p.DeletionTimestamp = &metav1.Time{Time: h.at}
			h.pods[8] = h.write(watch.Modified, p).(*corev1.Pod)
			h.evict(1)
		}, nil, 1},
		{"the operator's delete of a healthy member", func(h *history) {
			h.asked("pf-2", false, 200, "celld-operator/v0.1")
			h.deletePod(2, true)
		}, [][]string{{"clause 3: Pod pf-2", "deleted with its fleet live", "asked by delete by admin (celld-operator/v0.1)"}}, 0},
		{"an eviction the audit log does not show", func(h *history) {
			h.deletePod(2, true)
		}, [][]string{{"clause 3: Pod pf-2", "deleted with its fleet live"}}, 0},
		{"an eviction the budget refused, then a delete", func(h *history) {
			h.asked("pf-2", true, 429, "kubectl/drain")
			h.deletePod(2, true)
		}, [][]string{{"clause 3: Pod pf-2", "deleted with its fleet live"}}, 0},
		{"an eviction of a healed member, then its replacement deleted", func(h *history) {
			h.nodeDown(0, true)
			h.asked("pf-0", false, 200, "celld-operator/v0.1")
			h.deletePod(0, false)
			h.asked("pf-0", true, 201, "kubectl/drain")
			h.replace(0, "n9")
			h.deletePod(0, true)
		}, [][]string{{"clause 3: Pod pf-0", "deleted with its fleet live"}}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHistory(t, 9, 9)
			c.story(h)
			v := Judge(h.entries, h.requests)
			t.Logf("%d checks; %s", v.Checks, v.Summary())
			matchViolations(t, v.Violations, c.want)
			if v.Explained["Pod: evicted"] != c.evicted || v.ByClause[drainClause] != c.evicted {
				t.Errorf("deletions put down to an eviction: %d, drain checks %d; want %d", v.Explained["Pod: evicted"], v.ByClause[drainClause], c.evicted)
			}
		})
	}
}

// asked records a request for the deletion of the member named pod, as the audit log has it,
// between the last write and the next.
func (h *history) asked(pod string, eviction bool, code int32, agent string) {
	h.requests = append(h.requests, Request{At: h.at.Add(5 * time.Millisecond), Resource: "pods", Name: pod,
		Eviction: eviction, User: "admin", Agent: agent, Code: code})
}

// evict: a drain evicts member i, which the budget allows and the member starts terminating.
func (h *history) evict(i int) {
	h.asked(h.pods[i].Name, true, 201, "kubectl/drain")
	h.deletePod(i, true)
}

// replace: member i's controller makes its replacement, Ready on node to.
func (h *history) replace(i int, to string) {
	h.pods[i] = h.newPod(fmt.Sprintf("pf-%d", i), to, "StatefulSet", h.set.Name, h.set.UID)
}
