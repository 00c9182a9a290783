package raftlock

import "testing"

func TestSSEParserHandlesCommentsMultilineDataAndCRLF(t *testing.T) {
	var p sseParser
	var got []sseEvent
	for _, line := range []string{
		": keep-alive\n", "\n",
		"event: leader\r\n", "data: {\"a\":\n", "data: 1}\n", "\r\n",
		"data:plain\n", "\n",
		"event: x\n", "\n", // no data: nothing dispatched
	} {
		if ev, ok := p.line(line); ok {
			got = append(got, ev)
		}
	}
	want := []sseEvent{{"leader", "{\"a\":\n1}"}, {"message", "plain"}}
	if len(got) != len(want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
