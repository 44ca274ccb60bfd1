package machine

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/events"
)

// Condition reasons of node maintenance.
const (
	// ReasonMemberEvicted: a drain is evicting a member (the Eviction API); the budget holds the
	// other members until it is back and ready.
	ReasonMemberEvicted = "MemberEvicted"
	// ReasonWaitingForNode: a member cannot start again until a cordoned node is uncordoned (its
	// disk is on that node), or while cordoned nodes leave none it may be placed on.
	ReasonWaitingForNode = "WaitingForNode"
	// EvictedEventPrefix keys the Event that tells of a member evicted by a drain.
	EvictedEventPrefix = "event/evicted/"
)

// away is a member that node maintenance takes or holds away. None of it is the operator's to
// fix: a drain evicts, a person uncordons. The fleet says who and which node, instead of calling
// the member stuck or healing it.
type away struct {
	member *events.Member
	// node is the node the member is evicted from, or waits for.
	node string
	// evicted: the member is terminating because the Eviction API asked for it.
	evicted bool
	// waits: the member's disk is on node, which is cordoned: it can start nowhere else.
	waits bool
	// unplaced is the scheduler's word for a member no node takes while some are cordoned.
	unplaced string
}

// CordonedRefusal is how the scheduler counts the cordoned nodes among those it turned a Pod
// down on (the NodeUnschedulable filter's reason, in "0/5 nodes are available: 1 node(s) were
// unschedulable, ..."). A refusal without it was not the cordon's doing.
const CordonedRefusal = "node(s) were unschedulable"

// awayOf says whether node maintenance holds member m away, and how.
func (fx *facts) awayOf(m *events.Member) (away, bool) {
	v := fx.view
	if m.Terminating {
		if m.Disruption == events.DisruptionEviction {
			return away{member: m, node: m.NodeName, evicted: true}, true
		}
		return away{}, false
	}
	if m.Ready || m.NodeName != "" || m.Unschedulable == "" {
		return away{}, false
	}
	if m.ClaimName != "" {
		if d := fx.disk(m.ClaimName); d != nil && d.Node != "" && v.Nodes[d.Node].Cordoned {
			return away{member: m, node: d.Node, waits: true}, true
		}
	}
	if !strings.Contains(m.Unschedulable, CordonedRefusal) {
		// Not maintenance: the scheduler turned it down before it weighed any node (a claim
		// that cannot bind, a missing one), or on no cordoned node: no uncordon would place it.
		return away{}, false
	}
	var cordoned []string
	for name, n := range v.Nodes {
		if n.Cordoned {
			cordoned = append(cordoned, name)
		}
	}
	if len(cordoned) == 0 {
		// Not maintenance: a member no node takes on an uncordoned cluster is stuck, and the
		// fleet says so once the grace period is over.
		return away{}, false
	}
	sort.Strings(cordoned)
	return away{member: m, node: strings.Join(cordoned, ", "), unplaced: m.Unschedulable}, true
}

// isAway reports whether m is one of the members maintenance holds away.
func (fx *facts) isAway(m *events.Member) bool {
	for _, a := range fx.away {
		if a.member == m {
			return true
		}
	}
	return false
}

// awayWaits: a member waits for a person to uncordon a node; nothing ends on its own.
func (fx *facts) awayWaits() bool {
	for _, a := range fx.away {
		if !a.evicted {
			return true
		}
	}
	return false
}

// awayText names each member maintenance holds away, the node, and what it waits for.
func (fx *facts) awayText() string {
	var parts []string
	for _, a := range fx.away {
		m := a.member.Name
		switch {
		case a.evicted:
			parts = append(parts, fmt.Sprintf("member %s is being evicted from node %s by a drain: the disruption budget lets no other member go until it is back and ready", m, a.node))
		case a.waits:
			parts = append(parts, fmt.Sprintf("member %s waits for node %s, which is cordoned: its disk is on that node, so it starts again there once the node is uncordoned (kubectl uncordon %s)", m, a.node, a.node))
		default:
			parts = append(parts, fmt.Sprintf("member %s cannot be placed while nodes %s are cordoned (%s): it starts once one of them is uncordoned or another node fits", m, a.node, a.unplaced))
		}
	}
	out := strings.Join(parts, "; ")
	if fx.target.Members == 1 {
		out += "; it is the fleet's only member, so the fleet is down until it is back"
	}
	return out
}

// evictedEvents tells once of each member a drain evicts, as a Normal Event: maintenance is no
// fault, but the person running it sees which member each eviction took away.
func (p *planner) evictedEvents() {
	var seen map[types.UID]bool
	for _, a := range p.fx.away {
		if !a.evicted {
			continue
		}
		uid := a.member.UID
		if seen == nil {
			seen = map[types.UID]bool{}
		}
		seen[uid] = true
		if p.m.evictions[uid] {
			continue
		}
		key := EvictedEventPrefix + string(uid)
		p.add(Action{Kind: RecordEvent, Key: key, EventType: "Normal", Reason: ReasonMemberEvicted,
			Message: fmt.Sprintf("member %s evicted from node %s by a drain (the Eviction API); the disruption budget holds the fleet's other members until it is back and ready", a.member.Name, a.node)})
	}
	// Only the evictions still in view are remembered: a member gone is told of no more.
	p.m.evictionsInView = seen
}

// cordonedMember says, for the scale-in that waits on it, which member's node is cordoned (the
// first by name), empty when none. A drain cordons first and evicts next, through a budget that
// knows nothing of the operator's writes: were a member removed while another may be evicted,
// both could be away at once.
func cordonedMember(v *events.View) string {
	var m *events.Member
	for i := range v.Members {
		c := &v.Members[i]
		if n, ok := v.Nodes[c.NodeName]; ok && n.Cordoned && (m == nil || c.Name < m.Name) {
			m = c
		}
	}
	if m == nil {
		return ""
	}
	return fmt.Sprintf("node %s, where member %s runs, to be uncordoned: a drain may evict that member, and no member is removed while another may be away (kubectl uncordon %s once its maintenance is done)", m.NodeName, m.Name, m.NodeName)
}
