package celldstore

import (
	"hash/fnv"
	"sort"
)

// Replicas is how many members hold every acknowledged key: the fleet tolerates losing any one
// member, and not two at once.
const Replicas = 2

// score ranks member for key (rendezvous hashing). Ranking a subset of members keeps their
// order, so the first live members in the ranking over everyone are the owners over the live
// ones: a member coming back finds itself owning exactly what it owned before it left.
func score(member, key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(key))
	x := h.Sum64()
	// FNV alone ranks names that differ in one character too alike; a finalizer spreads them.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Owners returns the first n of members in key's ranking.
func Owners(key string, members []string, n int) []string {
	ranked := append([]string(nil), members...)
	sort.Slice(ranked, func(i, j int) bool {
		si, sj := score(ranked[i], key), score(ranked[j], key)
		if si != sj {
			return si > sj
		}
		return ranked[i] < ranked[j]
	})
	if len(ranked) > n {
		ranked = ranked[:n]
	}
	return ranked
}

// owns tells whether me is among key's first n members, without sorting.
func owns(me, key string, members []string, n int) bool {
	mine := score(me, key)
	above := 0
	for _, m := range members {
		if m == me {
			continue
		}
		if s := score(m, key); s > mine || (s == mine && m < me) {
			above++
			if above >= n {
				return false
			}
		}
	}
	return true
}
