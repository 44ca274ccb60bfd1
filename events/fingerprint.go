package events

import "hash/maphash"

// seed keys the fingerprints of one process; fingerprints are never stored or compared across
// processes.
var seed = maphash.MakeSeed()

// fingerprint identifies everything a decision reads from a view except the clock. Two views
// with the same fingerprint differ at most in Now; a decision that asked for nothing (not even
// a requeue) does not depend on Now, so it holds for both.
func fingerprint(v *View) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	str := func(s string) { h.WriteString(s); h.WriteByte(0) }
	num := func(n int64) {
		for i := 0; i < 8; i++ {
			h.WriteByte(byte(n >> (8 * i)))
		}
	}
	flag := func(b bool) {
		if b {
			h.WriteByte(1)
		} else {
			h.WriteByte(0)
		}
	}
	f := v.Fleet
	str(string(f.UID))
	str(f.ResourceVersion)
	// The status itself, not only the resourceVersion: a driver may show the fleet with a status
	// of its own on its way (loop.Overlayer) under the same resourceVersion, and a view decided on
	// one status must not stand for one on another (a write that failed).
	st := &f.Status
	num(st.ObservedGeneration)
	str(string(st.State))
	num(int64(st.Members.Desired)<<32 | int64(st.Members.Current))
	num(int64(st.Members.Ready)<<32 | int64(st.Members.Updated))
	if r := st.RecommendedMembers; r != nil {
		num(int64(*r))
	} else {
		num(-1)
	}
	str(st.Selector)
	str(st.BlockedBy)
	str(st.NextAction)
	if d := st.Disks; d != nil {
		num(int64(len(d.Unused))<<32 | int64(len(d.Foreign)))
		for _, n := range d.Unused {
			str(n)
		}
		for _, n := range d.Foreign {
			str(n)
		}
		str(d.Size)
		num(int64(len(d.Claims))<<32 | int64(len(d.Larger)))
		for i := range d.Claims {
			c := &d.Claims[i]
			str(c.Claim)
			str(c.Member)
			str(c.Requested)
			str(c.Capacity)
			str(c.Resize)
			str(c.Message)
		}
		for _, n := range d.Larger {
			str(n)
		}
	} else {
		num(-1)
	}
	if r := st.Rollout; r != nil {
		str(r.Revision)
		str(r.CurrentRevision)
		num(int64(r.Updated)<<32 | int64(r.Total))
		num(int64(r.Partition))
		flag(r.Held)
	} else {
		num(-1)
	}
	num(int64(len(st.Conditions)))
	for i := range st.Conditions {
		c := &st.Conditions[i]
		str(c.Type)
		str(string(c.Status))
		str(c.Reason)
		str(c.Message)
		num(c.ObservedGeneration)
		num(c.LastTransitionTime.Unix())
	}
	flag(v.Deleting)
	flag(v.Uninstalling)
	flag(v.HasFinalizer)
	flag(v.Asleep)
	flag(v.AsleepStopped)
	flag(v.NodesSynced)
	flag(v.StorageClassMissing)
	flag(v.StorageClassFixed)
	flag(v.ServiceAccountMissing)
	flag(v.PriorityClassMissing)
	for _, u := range v.Unowned {
		str(u)
	}
	if r := v.Refused; r != nil {
		str(r.Object)
		str(r.Message)
	}
	r := &v.Reservation
	flag(r.Exists)
	str(r.Name)
	str(string(r.BoundTo))
	if c := r.Claimant; c != nil {
		str(string(c.UID))
	} else {
		h.WriteByte(0)
	}
	num(int64(len(r.History)))
	for i := range r.History {
		d := &r.History[i]
		num(d.Time.Unix())
		str(string(d.Kind))
		num(int64(d.From)<<32 | int64(d.To))
	}
	if s := v.Owned.StatefulSet; s != nil {
		str(s.ResourceVersion)
	}
	if d := v.Owned.Deployment; d != nil {
		str(d.ResourceVersion)
	}
	num(int64(len(v.Owned.Objects)))
	for i := range v.Owned.Objects {
		str(v.Owned.Objects[i].ResourceVersion)
	}
	num(int64(len(v.Members)))
	for i := range v.Members {
		m := &v.Members[i]
		str(m.ResourceVersion)
		if n, ok := v.Nodes[m.NodeName]; ok {
			flag(n.Ready)
			flag(n.Fenced)
			flag(n.Cordoned)
			num(n.UnhealthySince.Unix())
		} else {
			h.WriteByte(2)
		}
	}
	num(int64(len(v.Disks)))
	for i := range v.Disks {
		d := &v.Disks[i]
		str(d.ResourceVersion)
		// A member that waits for its disk's node is told apart by that node's cordon alone.
		if n, ok := v.Nodes[d.Node]; ok {
			flag(n.Cordoned)
		} else {
			h.WriteByte(2)
		}
	}
	if u := v.Utilization; u != nil {
		num(int64(u.Percent))
		num(int64(u.Members))
		flag(u.Unavailable)
	}
	return h.Sum64()
}

// Fingerprinted is the view's fingerprint: the one Normalize computed, or computed now for a view
// built or changed by hand (Fingerprint zero).
func (v *View) Fingerprinted() uint64 {
	if v.Fingerprint != 0 {
		return v.Fingerprint
	}
	return fingerprint(v)
}
