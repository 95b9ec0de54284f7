package bench

import (
	"os"
	"testing"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestMain gives controller-runtime's logger a sink before the bench's
// watches use it: without one its first message (a watch the API server
// closed, at V(4)) is a warning with a stack trace in every long run.
// Info and above go to stderr; debug levels are dropped.
func TestMain(m *testing.M) {
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.InfoLevel)))
	os.Exit(m.Run())
}
