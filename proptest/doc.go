// Package proptest holds the property tests of the safety contract: rapid model-based tests over
// random lifecycle sequences (`go test ./proptest`, `make fuzz`) and the golden scenario scripts
// of testdata/scenarios. The world they run in is proptest/harness; the judges are
// proptest/judge.
package proptest
