package sim

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podRuntime is what a kubelet knows of a Pod that the Pod object does not say.
type podRuntime struct {
	// readyAt is when the member reports ready, unless something interrupts it first.
	readyAt time.Time
	// down: the Pod's node was unhealthy; the member must recover again once it is back.
	down bool
}

func (c *Cluster) runtimeOf(uid types.UID) *podRuntime {
	rt := c.runtime[uid]
	if rt == nil {
		rt = &podRuntime{}
		c.runtime[uid] = rt
	}
	return rt
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func runningAndReady(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) }

func terminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// unavailable is the StatefulSet controller's isUnavailable with minReadySeconds 0.
func unavailable(p *corev1.Pod) bool { return !podReady(p) || terminating(p) }

// brokenPod reports whether any of the Pod's containers runs an image that never becomes ready.
func (c *Cluster) brokenPod(p *corev1.Pod) bool {
	for _, ctr := range p.Spec.Containers {
		if c.broken[ctr.Image] {
			return true
		}
	}
	return false
}

// runKubelets plays every node's kubelet (and, for Pods on unhealthy or missing nodes, the node
// lifecycle controller that marks them not ready).
func (c *Cluster) runKubelets() bool {
	changed := false
	for _, p := range c.pods() {
		if p.Spec.NodeName != "" && c.runPod(p) {
			changed = true
		}
	}
	return changed
}

func (c *Cluster) runPod(p *corev1.Pod) bool {
	rt := c.runtimeOf(p.UID)
	if c.nodeState(p.Spec.NodeName) != NodeReady {
		// Nobody runs this Pod's containers any more: it cannot finish terminating, and it is not
		// ready whatever its member was doing.
		rt.down = true
		if notReadyAlready(p) {
			return false
		}
		next := p.DeepCopy()
		setPodCondition(next, corev1.PodReady, false, c.now)
		setPodCondition(next, corev1.ContainersReady, false, c.now)
		return c.put(next)
	}
	if terminating(p) {
		if !c.now.Before(p.DeletionTimestamp.Time) {
			c.remove(p)
			return true
		}
		// The member got SIGTERM: it is leaving and no longer serves.
		if notReadyAlready(p) {
			return false
		}
		next := p.DeepCopy()
		setPodCondition(next, corev1.PodReady, false, c.now)
		setPodCondition(next, corev1.ContainersReady, false, c.now)
		return c.put(next)
	}
	if p.Status.Phase != corev1.PodPending && !rt.down {
		// The common case, a member that runs on: nothing to copy when nothing changes.
		if ready := !c.now.Before(rt.readyAt) && !c.brokenPod(p); conditionIs(p, corev1.PodReady, ready) &&
			conditionIs(p, corev1.ContainersReady, ready) && containersReady(p, ready) {
			return false
		}
	}
	next := p.DeepCopy()
	if next.Status.Phase == corev1.PodPending {
		c.startPod(next)
		rt.readyAt = c.now.Add(c.opts.RecoveryDelay)
	} else if rt.down {
		rt.readyAt = c.now.Add(c.opts.RecoveryDelay)
	}
	rt.down = false
	ready := !c.now.Before(rt.readyAt) && !c.brokenPod(next)
	setPodCondition(next, corev1.PodReady, ready, c.now)
	setPodCondition(next, corev1.ContainersReady, ready, c.now)
	for i := range next.Status.ContainerStatuses {
		next.Status.ContainerStatuses[i].Ready = ready
	}
	return c.put(next)
}

func (c *Cluster) startPod(p *corev1.Pod) {
	start := metav1.NewTime(c.now)
	c.ipSeq++
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &start
	p.Status.PodIP = fmt.Sprintf("10.244.%d.%d", c.ipSeq/250, c.ipSeq%250+1)
	p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
	setPodCondition(p, corev1.PodInitialized, true, c.now)
	p.Status.ContainerStatuses = nil
	for _, ctr := range p.Spec.Containers {
		started := true
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image, Started: &started,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}},
		})
	}
}

// setPodCondition sets a condition, moving its lastTransitionTime only when its status changes:
// readers measure how long a member has been not ready from it.
func setPodCondition(p *corev1.Pod, t corev1.PodConditionType, ok bool, now time.Time) {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	for i := range p.Status.Conditions {
		cond := &p.Status.Conditions[i]
		if cond.Type == t {
			if cond.Status != status {
				cond.Status = status
				cond.LastTransitionTime = metav1.NewTime(now)
			}
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: status,
		LastTransitionTime: metav1.NewTime(now)})
}

// crash restarts a running member: it stops being ready now and recovers after the delay.
func (c *Cluster) crash(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || terminating(p) {
		return false
	}
	c.runtimeOf(p.UID).readyAt = c.now.Add(c.opts.RecoveryDelay)
	next := p.DeepCopy()
	setPodCondition(next, corev1.PodReady, false, c.now)
	setPodCondition(next, corev1.ContainersReady, false, c.now)
	for i := range next.Status.ContainerStatuses {
		cs := &next.Status.ContainerStatuses[i]
		cs.Ready = false
		cs.RestartCount++
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
			Reason: "Error", FinishedAt: metav1.NewTime(c.now)}}
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.now)}}
	}
	return c.put(next)
}

// conditionIs reports whether the Pod has condition t with the status ok says.
func conditionIs(p *corev1.Pod, t corev1.PodConditionType, ok bool) bool {
	want := corev1.ConditionFalse
	if ok {
		want = corev1.ConditionTrue
	}
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == want
		}
	}
	return false
}

// notReadyAlready: the Pod already says it is not ready, as a stopped member must.
func notReadyAlready(p *corev1.Pod) bool {
	return conditionIs(p, corev1.PodReady, false) && conditionIs(p, corev1.ContainersReady, false)
}

func containersReady(p *corev1.Pod, ready bool) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Ready != ready {
			return false
		}
	}
	return true
}
