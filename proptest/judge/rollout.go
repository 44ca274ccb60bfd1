package judge

// HeldRolloutWrites counts the StatefulSet writes of fleets that stage their rollouts
// (spec.rollout), judged against the held rollout's promise.
const HeldRolloutWrites = "writes of a staged rollout's StatefulSet, judged for its canary count"

// HeldRollout names the promise of a staged rollout (spec.rollout.canary N): a change of the
// members' template reaches the N highest ordinals and holds there until a person approves its
// revision; without that approval the partition never falls below replicas - N (nor below
// where it stood, when a growth put members above it), so no member past the canaries goes.
const HeldRollout = "a held rollout lets no member past its canaries go"

// rolloutWrites judges every write of a staged rollout's StatefulSet: a write that changes the
// template holds at the top canary members (partition at least replicas - canary); any other
// write without an approval of the set's revision lowers the partition at most to replicas -
// canary, never below where it stood. Judged under clause 1: a member past the canaries that
// goes is a member taken away that nobody asked to take.
func (j *Judge) rolloutWrites() error {
	writes := j.c.PartitionWrites()
	for _, w := range writes[j.partitions:] {
		hold := max(w.Replicas-w.Canary, 0)
		if w.Created || w.Approved {
			continue
		}
		j.Extra[HeldRolloutWrites]++
		floor := min(w.PrevPartition, hold)
		if w.TemplateChanged {
			floor = hold
		}
		if w.Partition < floor {
			return fail(C1ShrinkOneAfterRollout, "%s: StatefulSet %s/%s written with partition %d (was %d; replicas %d, canary %d, template changed: %t) without an approval of its revision: at least %d",
				HeldRollout, w.Namespace, w.Name, w.Partition, w.PrevPartition, w.Replicas, w.Canary, w.TemplateChanged, floor)
		}
	}
	j.partitions = len(writes)
	return nil
}
