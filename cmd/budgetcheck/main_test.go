package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		args     []string
		goArgs   []string
		packages []string
		extra    []string
		noFields bool
		err      string
	}{
		{args: nil},
		{args: []string{"./..."}, packages: []string{"./..."}},
		{args: []string{"-run", "TestX", "./a", "-count=2"}, goArgs: []string{"-run", "TestX", "-count=2"}, packages: []string{"./a"}},
		{args: []string{"-instrument", "example.com/m/b,./c", "."}, packages: []string{"."}, extra: []string{"example.com/m/b", "./c"}},
		{args: []string{"-instrument=x", "-fields=false"}, extra: []string{"x"}, noFields: true},
		{args: []string{"-budgettest.seed=3", "./p"}, goArgs: []string{"-budgettest.seed=3"}, packages: []string{"./p"}},
		{args: []string{"-v", "-args", "-x", "y"}, goArgs: []string{"-v", "-args", "-x", "y"}},
		{args: []string{"-overlay=o.json"}, err: "-overlay is budgetcheck's own"},
		{args: []string{"-modfile", "x.mod"}, err: "-modfile is budgetcheck's own"},
		{args: []string{"-C", "dir"}, err: "-C is not supported"},
		{args: []string{"-run"}, err: "needs a value"},
		{args: []string{"-fields=maybe"}, err: "-fields=maybe"},
	}
	for _, tt := range tests {
		inv, err := parse(tt.args)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parse(%q) error = %v, want one containing %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parse(%q) error = %v", tt.args, err)
			continue
		}
		if !slices.Equal(inv.goArgs, tt.goArgs) || !slices.Equal(inv.packages, tt.packages) || !slices.Equal(inv.extra, tt.extra) || inv.noFields != tt.noFields {
			t.Errorf("parse(%q) = go args %q, packages %q, extra %q, noFields %v; want %q, %q, %q, %v",
				tt.args, inv.goArgs, inv.packages, inv.extra, inv.noFields, tt.goArgs, tt.packages, tt.extra, tt.noFields)
		}
	}
}

func TestParseHelp(t *testing.T) {
	for _, a := range []string{"-h", "-help", "--help", "--h"} {
		if _, err := parse([]string{"./x", a}); !errors.Is(err, errHelp) {
			t.Errorf("parse(%q) error = %v, want errHelp", a, err)
		}
	}
	if !strings.HasPrefix(usage, "usage: budgetcheck") || !strings.Contains(usage, "go tool budgetcheck") {
		t.Errorf("usage does not start with budgetcheck's own usage line or lacks the tool form:\n%s", usage)
	}
}
