// Package machine is the per-fleet lifecycle state machine: it takes a View of one fleet and
// decides, returning the fleet's state, its status and the actions (plain data) that move it on.
//
// It is pure: no client, no clock, no randomness. The state is derived from observation, so an
// operator that restarts, or a second replica that takes over, lands in the same state and makes
// the same decision.
package machine
