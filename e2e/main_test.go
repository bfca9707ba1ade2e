package e2e

import (
	"os"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/realstack"
)

// TestMain builds the exporter's binary once for every test of the package
// (realstack.BuildExporter), not once a test.
func TestMain(m *testing.M) { os.Exit(realstack.Main(m)) }
