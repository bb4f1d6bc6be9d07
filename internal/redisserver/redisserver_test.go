package redisserver

import "testing"

// A started server answers PING, and no longer does once killed.
func TestStartAndKill(t *testing.T) {
	s := Start(t)
	if err := ping(s.Addr); err != nil {
		t.Fatalf("ping(%s) after Start = %v, want nil", s.Addr, err)
	}
	s.Kill()
	if err := ping(s.Addr); err == nil {
		t.Fatalf("ping(%s) after Kill = nil, want an error", s.Addr)
	}
	s.Kill() // a second Kill does nothing
}
