package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"example.invalid/raftlock/clients/go/internal/testcluster"
)

// runEnv makes the test binary run main() instead of the tests: the
// example runs as its own process, exactly as `go run` would run it.
const runEnv = "RAFTLOCK_README_EXAMPLE_RUN"

func TestMain(m *testing.M) {
	if os.Getenv(runEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The README's example runs against a cluster, reached through
// RAFTLOCK_ENDPOINTS (unset, it would use `raftlock up`'s defaults).
func TestReadmeExampleRuns(t *testing.T) {
	cluster, err := testcluster.StartUp(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.Patience)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runEnv+"=1", "RAFTLOCK_ENDPOINTS="+strings.Join(cluster.Endpoints, ","))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example failed: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`^locked orders/42 with fencing token [1-9][0-9]*\n$`).Match(out) {
		t.Fatalf("example printed %q", out)
	}
}

// The client's README shows this file verbatim, and so does the
// repository's README once it carries the same markers.
func TestReadmeShowsThisExample(t *testing.T) {
	source, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- examples/readme/main.go -->\n```go\n", "```\n<!-- /examples/readme/main.go -->"
	for _, tc := range []struct {
		path     string
		required bool
	}{{"../../README.md", true}, {"../../../../README.md", false}} {
		readme, err := os.ReadFile(tc.path)
		if err != nil && !tc.required && os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		i, j := bytes.Index(readme, []byte(begin)), bytes.Index(readme, []byte(end))
		if i < 0 && !tc.required {
			continue
		}
		if i < 0 || j < i {
			t.Fatalf("%s has no examples/readme/main.go block", tc.path)
		}
		if shown := readme[i+len(begin) : j]; !bytes.Equal(shown, source) {
			t.Fatalf("%s shows\n%s\nbut main.go is\n%s", tc.path, shown, source)
		}
	}
}
