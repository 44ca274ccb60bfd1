package judge_test

import "github.com/celld/celld-operator/machine"

// A trigger the lifecycle table has no row for fails the tests that reach it; the operator only
// logs and counts one.
func init() { machine.PanicOnUnhandledTrigger = true }
