package ssa

import (
	"fmt"
	"sort"
	"strings"
)

// Action is what applying an object did.
type Action string

// Actions.
const (
	Created    Action = "created"
	Configured Action = "configured"
	Unchanged  Action = "unchanged"
	Deleted    Action = "deleted"
)

// Change is the outcome for one object.
type Change struct {
	Kind      string
	Namespace string
	Name      string
	Action    Action
	// Pending is set on an Unchanged change when the object was created by
	// us moments ago and the cache has not shown it yet, or deleted by us
	// moments ago and the cache still shows it as it was: nothing was
	// sent, and the caller should look again shortly (see
	// CreateExpectation).
	Pending bool
}

func (c Change) String() string {
	return fmt.Sprintf("%s/%s/%s: %s", c.Kind, c.Namespace, c.Name, c.Action)
}

// ChangeSet is the outcome of one reconcile.
type ChangeSet []Change

// String lists the changes one per line, sorted by kind, namespace and name,
// so equal sets print equally whatever the order of work.
func (s ChangeSet) String() string {
	lines := make([]string, len(s))
	for i, c := range s {
		lines[i] = c.String()
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// Pending reports whether an object we created is not in the cache yet, or
// one we deleted still shows there as it was.
func (s ChangeSet) Pending() bool {
	for _, c := range s {
		if c.Pending {
			return true
		}
	}
	return false
}

// Changed reports whether any object was created, configured or deleted.
func (s ChangeSet) Changed() bool {
	for _, c := range s {
		if c.Action != Unchanged {
			return true
		}
	}
	return false
}
