package judge_test

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// heal is the request a (buggy) operator sends to replace a member by force. Only the test builds
// it: the judge itself knows nothing of the machine.
func heal(name, uid, rv string) machine.Action {
	return machine.Action{Kind: machine.DeletePod, Key: "heal/" + name, Ref: kinds.Ref{Namespace: "prod", Name: name},
		UID: types.UID(uid), ResourceVersion: rv, Force: true, Reason: "NodeUnreachable"}
}
