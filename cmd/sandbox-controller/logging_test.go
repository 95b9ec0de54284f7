package main

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// countingCore counts the With calls that reach the core beneath.
type countingCore struct {
	zapcore.Core
	withs *int
}

func (c countingCore) With(fields []zapcore.Field) zapcore.Core {
	*c.withs++
	return countingCore{c.Core.With(fields), c.withs}
}

// A logger given fields at two levels encodes none of them until it
// writes, and then writes an entry with all of them; a level it does not
// log encodes nothing.
func TestLazyFieldsEncodeOnlyOnWrite(t *testing.T) {
	obs, logs := observer.New(zapcore.InfoLevel)
	withs := 0
	logger := zap.New(lazyFields{countingCore{obs, &withs}})

	child := logger.With(zap.String("namespace", "ns"), zap.String("name", "box")).With(zap.String("reconcileID", "r1"))
	child.Debug("not logged")
	if withs != 0 {
		t.Fatalf("fields encoded %d times before any entry was written", withs)
	}
	child.Info("reconciled")
	entries := logs.All()
	if len(entries) != 1 {
		t.Fatalf("%d entries, want 1", len(entries))
	}
	got := entries[0].ContextMap()
	for k, want := range map[string]string{"namespace": "ns", "name": "box", "reconcileID": "r1"} {
		if got[k] != want {
			t.Errorf("field %s = %v, want %s (entry %v)", k, got[k], want, got)
		}
	}
	if withs == 0 {
		t.Error("the fields reached the core beneath without a With")
	}
	// A sibling made from the same parent does not carry the child's ID.
	logger.With(zap.String("name", "other")).Info("sibling")
	if sib := logs.All()[1].ContextMap(); sib["reconcileID"] != nil || sib["name"] != "other" {
		t.Errorf("sibling entry %v", sib)
	}
}
