package instrument

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A copied module whose go.mod declares no go version, or one before
// generics, is raised to rewriteGo, so that the rewritten code, which
// calls generic hooks, compiles; a newer one is left as it is.
func TestRaiseGoVersion(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"module example.com/old\n", "go " + rewriteGo},
		{"module example.com/old\n\ngo 1.16\n", "go " + rewriteGo},
		{"module example.com/new\n\ngo 1.18\n", "go 1.18"},
		{"module example.com/new\n\ngo 1.24.0\n", "go 1.24.0"},
	} {
		p := filepath.Join(t.TempDir(), "go.mod")
		if err := os.WriteFile(p, []byte(tt.in), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := raiseGoVersion(p); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(got), tt.want+"\n") || strings.Count(string(got), "\ngo ") != 1 {
			t.Errorf("%q became %q, want a go directive %q", tt.in, got, tt.want)
		}
	}
}
