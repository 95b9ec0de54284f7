package controllers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// podWaitsItsTurn reports a Pod on its way that nothing has reported
// trouble with: the scheduler has not found it unschedulable (or gated),
// no container waits for any reason but being created or its init
// containers, none has restarted, and it is not terminating past its
// deadline. A Pod the scheduler or the kubelet has simply not got to yet
// in a burst waits its turn; nil (not in the cache yet) does too.
func podWaitsItsTurn(pod *corev1.Pod, now time.Time) bool {
	if pod == nil {
		return true
	}
	if pod.DeletionTimestamp != nil && now.After(pod.DeletionTimestamp.Time) {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse &&
			(c.Reason == corev1.PodReasonUnschedulable || c.Reason == corev1.PodReasonSchedulingGated) {
			return false
		}
	}
	return containersOnTheirWay(pod.Status.InitContainerStatuses) && containersOnTheirWay(pod.Status.ContainerStatuses)
}

// containersOnTheirWay reports containers none of which restarted or waits
// for anything but its creation or its Pod's init containers.
func containersOnTheirWay(statuses []corev1.ContainerStatus) bool {
	for i := range statuses {
		s := &statuses[i]
		if s.RestartCount > 0 {
			return false
		}
		if w := s.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return false
		}
	}
	return true
}
