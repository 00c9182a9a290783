package raftlock

import (
	"net/url"
	"strings"
	"testing"
)

// Tree paths take ZooKeeper's characters: the URL path must carry them
// escaped, so that `?`, `#`, `%` and spaces reach the server as part of
// the path.
func TestAPINodePathEscapesWhatAURLGivesMeaningTo(t *testing.T) {
	if got := apiNodePath("/"); got != "/v1/nodes" {
		t.Fatalf("root: %q", got)
	}
	if got := apiNodePath("/a/b"); got != "/v1/nodes/a/b" {
		t.Fatalf("plain path: %q", got)
	}
	p := "/odd dir?x=1#y/100% é"
	got := apiNodePath(p)
	if strings.ContainsAny(got, "?# ") {
		t.Fatalf("unescaped: %q", got)
	}
	back, err := url.PathUnescape(strings.TrimPrefix(got, "/v1/nodes"))
	if err != nil || back != p {
		t.Fatalf("%q decodes to %q (%v)", got, back, err)
	}
}
