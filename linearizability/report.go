package linearizability

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// report saves a violation for a human: porcupine's HTML rendering, headed
// by the budget, the model and the rule that f names, and f itself with the
// history (and the scenario, if f has one) as JSON, both in t.ArtifactDir().
// It fills f's model and verdict from r. It logs nothing and returns the
// paths, and a note for the failure message: where the files are, or that
// go test deletes them unless run with -artifacts.
func report[S any](t testing.TB, r Result[S], f Fixture) (htmlPath, jsonPath, note string) {
	t.Helper()
	dir := t.ArtifactDir()
	base := sanitize(f.Name)
	f.Model = specOf(r.m)
	f.ModelName = fmt.Sprintf("%T %+v", r.m, r.m)
	f.Verdict = r.Verdict
	f.History = r.History
	htmlPath = filepath.Join(dir, base+".html")
	title := fmt.Sprintf("budget: %s\nmodel:  %s\nrule:   %s\n%s", f.Budget, f.ModelName, f.Rule, r.Explain())
	var problems []string
	if err := r.writeHTML(htmlPath, title); err != nil {
		problems = append(problems, "could not write the HTML rendering: "+err.Error())
		htmlPath = ""
	}
	jsonPath = filepath.Join(dir, base+".json")
	if err := f.Save(jsonPath); err != nil {
		problems = append(problems, "could not save the history: "+err.Error())
		jsonPath = ""
	}
	note = fmt.Sprintf("rendering: %s\nhistory:   %s", htmlPath, jsonPath)
	if fl := flag.Lookup("test.artifacts"); fl == nil || fl.Value.String() != "true" {
		note += "\n(go test deletes these when the test ends: rerun with -artifacts to keep them)"
	}
	if len(problems) > 0 {
		note += "\n" + strings.Join(problems, "\n")
	}
	return htmlPath, jsonPath, note
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, name)
}
