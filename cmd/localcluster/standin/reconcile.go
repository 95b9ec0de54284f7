package standin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// gcPoll is how soon a directory whose Sandbox or PVCs are on their way
// out is looked at again.
const gcPoll = 2 * time.Second

// reconcile brings one Sandbox's process, kwok objects and directory in line
// with its Pod: a live Pod has a serving runtime and kwok objects pointing at
// it; without one, the process is stopped, the objects deleted and, once the
// Sandbox and its PVCs are gone, the directory removed. It returns a delay
// after which to look again, if any.
func (s *StandIn) reconcile(ctx context.Context, k Key) (time.Duration, error) {
	sbDir := SandboxDir(s.o.Dir, k)
	st, err := readState(sbDir)
	if err != nil {
		return 0, err
	}
	if pod := s.livePod(k); pod != nil {
		return 0, s.ensure(ctx, k, pod, st)
	}
	return s.release(ctx, k, st)
}

// ensure runs the Pod's runtime (adopting one that serves it already) and
// applies its kwok objects.
func (s *StandIn) ensure(ctx context.Context, k Key, pod *corev1.Pod, st State) error {
	sbDir := SandboxDir(s.o.Dir, k)
	_, sbUID := KeyOf(pod)
	if st.SandboxUID != "" && sbUID != "" && st.SandboxUID != sbUID {
		// A new Sandbox with an old one's name: the old one's files go,
		// unless PVCs of it are left (then they are kept as its data).
		if err := s.stop(k, st); err != nil {
			return err
		}
		left, _, err := s.pvcsLeft(ctx, k, st.SandboxUID)
		if err != nil {
			return err
		}
		if !left {
			if err := removeSandboxDir(s.o.Dir, k); err != nil {
				return err
			}
			s.o.Logger.Info("work directory of a deleted Sandbox removed", "sandbox", k.String(), "uid", st.SandboxUID)
		}
		st = State{}
	}
	if err := os.MkdirAll(sbDir, 0o755); err != nil {
		return err
	}
	running := alive(st.PID, sbDir)
	if running && st.PodUID != pod.UID {
		// The process of an earlier Pod (whose end this stand-in missed).
		if err := s.stop(k, st); err != nil {
			return err
		}
		running = false
	}
	if running {
		if s.lastApplied(k) == (applied{}) {
			s.o.Logger.Info("runtime adopted", "sandbox", k.String(), "pod", pod.Name, "pid", st.PID, "ports", st.ports())
		}
	} else {
		pid, pp, err := startProcess(ctx, processSpec{
			Runtime: s.o.Runtime, SbDir: sbDir, Env: envStrings(literalEnv(pod)), Pod: pod.Name, FreshLogs: st.PodUID != pod.UID,
			ShutdownTimeout: s.o.StopGrace / 2, ReadyTimeout: s.o.ReadyTimeout,
		})
		if err != nil {
			return err
		}
		st = State{SandboxUID: sbUID, Pod: pod.Name, PodUID: pod.UID, PID: pid, Port: pp.legacy, RESTPort: pp.rest, GRPCPort: pp.grpc, EnvdPort: pp.envd}
		if err := writeState(sbDir, st); err != nil {
			_ = stopProcess(pid, sbDir, s.o.StopGrace)
			return err
		}
		s.o.Logger.Info("runtime started", "sandbox", k.String(), "pod", pod.Name, "pid", pid, "address", fmt.Sprintf("%s:%d", Loopback, pp.legacy), "ports", pp,
			"workdir", WorkDir(s.o.Dir, k))
	}
	s.startPump(k, sbDir)
	want := applied{podUID: string(pod.UID), ports: st.ports()}
	if s.lastApplied(k) == want {
		return nil
	}
	if err := applyKwokObjects(ctx, s.dyn, kwokObjects(pod, sbDir, st.ports(), literalEnv(pod))); err != nil {
		return fmt.Errorf("applying the kwok objects of pod %s: %w", pod.Name, err)
	}
	s.setApplied(k, want)
	return nil
}

// release stops a Sandbox's runtime and deletes its Pod's kwok objects, and
// removes its directory once the Sandbox and its PVCs are gone.
func (s *StandIn) release(ctx context.Context, k Key, st State) (time.Duration, error) {
	sbDir := SandboxDir(s.o.Dir, k)
	if _, err := os.Stat(sbDir); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if st.PID != 0 || st.PodUID != "" {
		if err := s.stop(k, st); err != nil {
			return 0, err
		}
		if st.Pod != "" {
			if err := deleteKwokObjects(ctx, s.dyn, k.Namespace, st.Pod, st.PodUID); err != nil {
				return 0, fmt.Errorf("deleting the kwok objects of pod %s: %w", st.Pod, err)
			}
		}
		st = State{SandboxUID: st.SandboxUID}
		if err := writeState(sbDir, st); err != nil {
			return 0, err
		}
		s.setApplied(k, applied{})
	}
	gone, terminating, err := s.sandboxGone(ctx, k, st.SandboxUID)
	if err != nil || !gone {
		return pollIf(terminating), err
	}
	left, terminating, err := s.pvcsLeft(ctx, k, st.SandboxUID)
	if err != nil || left {
		return pollIf(terminating), err
	}
	if err := removeSandboxDir(s.o.Dir, k); err != nil {
		return 0, err
	}
	s.o.Logger.Info("work directory removed: its Sandbox and PVCs are gone", "sandbox", k.String())
	return 0, nil
}

func pollIf(terminating bool) time.Duration {
	if terminating {
		return gcPoll
	}
	return 0
}

// stop stops a Sandbox's runtime (if it runs) and its log pump, and writes
// out the rest of its log.
func (s *StandIn) stop(k Key, st State) error {
	sbDir := SandboxDir(s.o.Dir, k)
	wasAlive := alive(st.PID, sbDir)
	err := stopProcess(st.PID, sbDir, s.o.StopGrace)
	s.stopPump(k)
	if ferr := pumpOnce(sbDir, time.Now(), true); ferr != nil && !errors.Is(ferr, os.ErrNotExist) {
		err = errors.Join(err, ferr)
	}
	if wasAlive {
		s.o.Logger.Info("runtime stopped", "sandbox", k.String(), "pod", st.Pod, "pid", st.PID)
	}
	return err
}

// sandboxGone reports whether the Sandbox that owned the directory is gone
// (not found, or replaced by one with another UID), and whether it is being
// deleted.
func (s *StandIn) sandboxGone(ctx context.Context, k Key, uid types.UID) (gone, terminating bool, err error) {
	u, err := s.dyn.Resource(sandboxv1beta1.GroupVersion.WithResource("sandboxes")).Namespace(k.Namespace).
		Get(ctx, k.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, false, nil
	} else if err != nil {
		return false, false, err
	}
	if uid != "" && u.GetUID() != uid {
		return true, false, nil
	}
	return false, u.GetDeletionTimestamp() != nil, nil
}

// pvcsLeft reports whether PVCs owned by the Sandbox of that UID are left,
// and whether any of them is being deleted.
func (s *StandIn) pvcsLeft(ctx context.Context, k Key, uid types.UID) (left, terminating bool, err error) {
	if uid == "" {
		return false, false, nil
	}
	// Every PVC of the namespace, filtered by owner below: this package
	// must not import render (the test harness, which render's own tests
	// use, imports it), and a development cluster's namespace is small.
	list, err := s.cs.CoreV1().PersistentVolumeClaims(k.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, false, err
	}
	for _, pvc := range list.Items {
		for _, ref := range pvc.OwnerReferences {
			if ref.UID == uid && ref.Name == k.Name && sandboxv1beta1.RefersTo(ref, sandboxv1beta1.SandboxKind) {
				left = true
				terminating = terminating || pvc.DeletionTimestamp != nil
			}
		}
	}
	return left, terminating, nil
}

func (s *StandIn) lastApplied(k Key) applied {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied[k]
}

func (s *StandIn) setApplied(k Key, a applied) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a == (applied{}) {
		delete(s.applied, k)
	} else {
		s.applied[k] = a
	}
}

func envStrings(env []corev1.EnvVar) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		out = append(out, e.Name+"="+e.Value)
	}
	return out
}

// StopAll stops every runtime recorded under dir (at once, each with grace
// after SIGTERM) and clears their PIDs. The directories stay.
func StopAll(dir string, grace time.Duration) error {
	keys, err := listKeys(dir)
	if err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, k := range keys {
		sbDir := SandboxDir(dir, k)
		st, err := readState(sbDir)
		if err != nil || st.PID == 0 {
			continue
		}
		wg.Go(func() {
			err := stopProcess(st.PID, sbDir, grace)
			if err == nil {
				_ = pumpOnce(sbDir, time.Now(), true)
				st.PID, st.Port, st.RESTPort, st.GRPCPort = 0, 0, 0, 0
				err = writeState(sbDir, st)
			}
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
