package runtimeclass

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/render"
)

// The settings of --default-runtime-class besides a class name.
const (
	// Auto takes the first class of the allowlist that the cluster has.
	Auto = "auto"
	// None gives no default: a Pod runs under the class its template names.
	// An empty setting (the flag's default before auto) means the same.
	None = "none"
)

// The controller reads RuntimeClasses (cluster-scoped) from its cache.
//
// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get;list;watch

// CheckSetting refuses a --default-runtime-class value that is neither
// auto, none (or empty) nor a RuntimeClass name.
func CheckSetting(setting string) error {
	switch setting {
	case Auto, None, "":
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(setting); len(errs) > 0 {
		return fmt.Errorf("--default-runtime-class=%q: want %s, %s or a RuntimeClass name", setting, Auto, None)
	}
	return nil
}

// Resolve is the default runtime class under a setting: for auto, the
// first class of allowlist (in its order) among existing, "" when the
// cluster has none of them; "" for none; the setting itself otherwise.
func Resolve(setting string, allowlist, existing []string) string {
	switch setting {
	case None, "":
		return ""
	case Auto:
		for _, c := range allowlist {
			if slices.Contains(existing, c) {
				return c
			}
		}
		return ""
	}
	return setting
}

// Source gives the defaults in force: a render.DefaultsSource for the
// Sandbox reconciler, the extension controllers and the webhook, which
// thus render the same Pod. Under auto it lists the RuntimeClasses in the
// manager's cache at every call (a handful of objects, no request), so a
// class installed or removed shows in the next Pod rendered. A Pod that
// exists keeps its class: the reconciler never changes a running Pod's
// spec.
type Source struct {
	setting   string
	allowlist []string
	reader    client.Reader
	log       logr.Logger

	mu   sync.Mutex
	last *string // what was last logged, nil before anything was
}

// New returns the source for a setting (auto, none or a class name) and
// the runtime-isolation allowlist, reading RuntimeClasses through reader
// (the manager's cache) under auto.
func New(setting string, allowlist []string, reader client.Reader, log logr.Logger) *Source {
	return &Source{setting: setting, allowlist: slices.Clone(allowlist), reader: reader, log: log}
}

// Setting is the --default-runtime-class value the source resolves.
func (s *Source) Setting() string {
	if s == nil || s.setting == "" {
		return None
	}
	return s.setting
}

// Dynamic reports a default that follows the cluster's RuntimeClasses
// (auto): controllers then look again at what a new class may let
// through.
func (s *Source) Dynamic() bool { return s != nil && s.setting == Auto }

// Allowed reports whether a class is in the allowlist.
func (s *Source) Allowed(class string) bool { return s != nil && slices.Contains(s.allowlist, class) }

// Watch starts the cache's RuntimeClass informer with the manager (under
// auto), so the first render does not wait for it and the readiness check
// that waits for the caches covers it.
func (s *Source) Watch(ctx context.Context, c cache.Cache) error {
	if !s.Dynamic() {
		return nil
	}
	if _, err := c.GetInformer(ctx, &nodev1.RuntimeClass{}); err != nil {
		return fmt.Errorf("watching RuntimeClasses: %w", err)
	}
	return nil
}

// listTimeout bounds a RuntimeClass list from the cache (which answers at
// once once synced).
const listTimeout = 10 * time.Second

// Current implements render.DefaultsSource. Under auto, a RuntimeClass
// list that fails gives no default: the Pod is judged (and refused by
// runtime-isolation) without one rather than run outside isolation.
func (s *Source) Current() render.Defaults {
	if s == nil {
		return render.Defaults{}
	}
	if !s.Dynamic() {
		return render.Defaults{RuntimeClassName: Resolve(s.setting, s.allowlist, nil)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	var list nodev1.RuntimeClassList
	if err := s.reader.List(ctx, &list); err != nil {
		s.report("", err)
		return render.Defaults{}
	}
	names := make([]string, 0, len(list.Items))
	for _, rc := range list.Items {
		if rc.DeletionTimestamp == nil {
			names = append(names, rc.Name)
		}
	}
	class := Resolve(s.setting, s.allowlist, names)
	s.report(class, nil)
	return render.Defaults{RuntimeClassName: class}
}

// report logs the default (or why there is none) when it changes.
func (s *Source) report(class string, err error) {
	key := "class " + class
	if err != nil {
		key = "error " + err.Error()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil && *s.last == key {
		return
	}
	s.last = &key
	switch {
	case err != nil:
		s.log.Error(err, "listing RuntimeClasses failed: no default runtime class until it works again")
	case class == "":
		s.log.Info("the cluster has no isolating RuntimeClass: Pods whose template names none get none (and runtime-isolation refuses them)",
			"defaultRuntimeClass", s.setting, "isolating", s.allowlist)
	default:
		s.log.Info("default runtime class for Pods whose template names none", "runtimeClass", class, "defaultRuntimeClass", s.setting)
	}
}

// FollowsCluster reports a defaults source whose value changes with the
// cluster's RuntimeClasses.
func FollowsCluster(d render.DefaultsSource) bool {
	s, ok := d.(interface{ Dynamic() bool })
	return ok && s.Dynamic()
}
