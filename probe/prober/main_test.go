package prober

import (
	"testing"

	"go.uber.org/goleak"
)

// Every probe closes its own connections; no goroutine may outlive the
// tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
