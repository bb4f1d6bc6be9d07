// Package surface holds the test that keeps the module's public API small:
// the count of exported names a reader of go doc meets in the public
// packages, deprecated ones apart.
package surface

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// budget is the most exported names the public packages may have.
const budget = 300

const modulePath = "github.com/retrybudget/retrybudget"

// TestPublicSurface counts, in each public package of this module (not
// internal/, cmd/, testdata/ nor a nested module), its exported
// package-level names and the exported methods of its exported types,
// leaving out the names documented as Deprecated. A type that aliases a
// type of an internal package brings that type's exported methods, which
// go doc does not list under it, into the count. This is how the rapid
// (116), porcupine (25) and goleak (10) counts the project compares itself
// with were made.
func TestPublicSurface(t *testing.T) {
	root := filepath.Join("..", "..")
	counts := map[string]int{}
	deprecated := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			base := d.Name()
			if strings.HasPrefix(base, ".") || base == "internal" || base == "cmd" || base == "testdata" || base == "docs" || base == "scripts" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		n, dep := count(t, root, f)
		counts[pkg] += n
		deprecated[pkg] += dep
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	total := 0
	for p, n := range counts {
		pkgs = append(pkgs, p)
		total += n
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		t.Logf("%-16s %3d (and %d deprecated)", p, counts[p], deprecated[p])
	}
	t.Logf("%-16s %3d", "total", total)
	if counts["budget"] == 0 || counts["budgettest"] == 0 {
		t.Fatalf("no names counted in budget or budgettest: the walk missed the packages")
	}
	if total > budget {
		t.Errorf("the public packages export %d names, over the budget of %d: make a name internal, or keep it one release as Deprecated", total, budget)
	}
}

// count returns the exported names f declares, deprecated ones apart, and
// how many deprecated ones it declares.
func count(t *testing.T, root string, f *ast.File) (n, dep int) {
	imports := map[string]string{}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = p
	}
	add := func(doc *ast.CommentGroup) {
		if doc != nil && strings.Contains(doc.Text(), "Deprecated:") {
			dep++
			return
		}
		n++
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Recv != nil && !exportedRecv(d.Recv.List[0].Type) {
				continue
			}
			add(d.Doc)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					doc := s.Doc
					if doc == nil && len(d.Specs) == 1 {
						doc = d.Doc
					}
					before := dep
					add(doc)
					if dep == before && s.Assign.IsValid() {
						n += internalMethods(t, root, imports, s.Type)
					}
				case *ast.ValueSpec:
					doc := s.Doc
					if doc == nil && len(d.Specs) == 1 {
						doc = d.Doc
					}
					for _, name := range s.Names {
						if name.IsExported() {
							add(doc)
						}
					}
				}
			}
		}
	}
	return n, dep
}

// exportedRecv reports whether a method's receiver type is exported.
func exportedRecv(e ast.Expr) bool { return ast.IsExported(recvName(e)) }

// internalMethods counts the exported methods of the type an alias names
// when that type is in an internal package of this module.
func internalMethods(t *testing.T, root string, imports map[string]string, e ast.Expr) int {
	if ix, ok := e.(*ast.IndexExpr); ok {
		e = ix.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return 0
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok {
		return 0
	}
	path, ok := strings.CutPrefix(imports[x.Name], modulePath+"/")
	if !ok || !strings.HasPrefix(path, "internal/") {
		return 0
	}
	files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(path), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv != nil && fd.Name.IsExported() && recvName(fd.Recv.List[0].Type) == sel.Sel.Name {
				n++
			}
		}
	}
	return n
}

// recvName is the name of a method's receiver type.
func recvName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
