package instrument

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"
)

// Config says what to rewrite.
type Config struct {
	Dir      string   // the directory go/packages runs in (the user's module); "" = current
	Patterns []string // package patterns to rewrite, e.g. "./..."
	Tags     []string // build tags (-tags), may be nil
	Tests    bool     // also rewrite _test.go files of those packages
	// Fields also puts a yield point before each read and write of a field
	// of a struct type declared in a rewritten package, in the files of
	// that package (not in _test.go files): see [Options].
	Fields bool
	// Modules also rewrites the packages the patterns name in other
	// modules than the main one. The go command overlays no file beneath
	// GOMODCACHE, so such a module is copied into Dir, its files rewritten
	// there, and [Result].ModFile replaces it by the copy. A module
	// replaced by a directory, or vendored, is overlaid as the main
	// module is.
	Modules bool
	// TestsOnly names packages (import paths) of which only the _test.go
	// files are rewritten: a package of the suite itself whose tests put
	// budgets of their own through it.
	TestsOnly []string
	// Work, if set, is the directory the result is written into (created
	// if need be) instead of a new temporary one: a stable path lets the
	// build cache keep the packages of a copied module.
	Work string
}

// Result is an overlay ready for go test -overlay.
type Result struct {
	Overlay string   // path of the overlay JSON file ({"Replace": {orig: rewritten}})
	Dir     string   // the temp dir holding it and the rewritten files; the caller removes it
	Files   []string // the original files rewritten (absolute), sorted
	Points  int      // how many yield points were inserted
	// ModFile, when a module of the module cache was rewritten (see
	// [Config].Modules), is a go.mod for go's -modfile flag: the main
	// module's, with a replace directive for each such module that names
	// its rewritten copy, and its go.sum beside it. "" otherwise.
	ModFile string
	// Modules are the module paths (path@version) rewritten in a copy.
	Modules []string
}

// Rewrite loads the packages cfg names, rewrites each of their files with
// [File], and writes the rewritten files and an overlay that maps each
// original file to its rewritten one into a new temporary directory:
//
//	go test -overlay res.Overlay ./...
//
// builds the rewritten code in place of the original. Only packages of
// the main module are rewritten (the go command overlays no file of the
// module cache), and not package yield and the packages it imports (their
// hooks would call themselves), nor any package outside the patterns. Rewrite fails if a
// package does not load or type-check, or if package yield cannot be
// loaded from cfg.Dir. A Result with no Files has an overlay that replaces
// nothing.
func Rewrite(cfg Config) (*Result, error) {
	var flags []string
	if len(cfg.Tags) > 0 {
		flags = []string{"-tags=" + strings.Join(cfg.Tags, ",")}
	}
	hookDeps, err := yieldDeps(cfg.Dir, flags)
	if err != nil {
		return nil, err
	}
	pkgs, err := packages.Load(&packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles |
			packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedModule,
		Dir:        cfg.Dir,
		BuildFlags: flags,
		Tests:      cfg.Tests,
	}, cfg.Patterns...)
	if err != nil {
		return nil, fmt.Errorf("instrument: %w", err)
	}
	var errs []error
	for _, p := range pkgs {
		for _, e := range p.Errors {
			errs = append(errs, fmt.Errorf("instrument: %s: %v", p.ID, e))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	files := sources(pkgs, hookDeps, cfg.Modules)
	if len(cfg.TestsOnly) > 0 {
		files = slices.DeleteFunc(files, func(s source) bool {
			return !strings.HasSuffix(s.path, "_test.go") && slices.Contains(cfg.TestsOnly, strings.TrimSuffix(s.pkg.PkgPath, "_test"))
		})
	}
	dir := cfg.Work
	if dir == "" {
		dir, err = os.MkdirTemp("", "instrument-")
	} else {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return nil, fmt.Errorf("instrument: %w", err)
	}
	var mods map[string]*copied
	if cfg.Modules {
		if mods, err = copyModules(cfg.Dir, dir, files); err != nil {
			if cfg.Work == "" {
				os.RemoveAll(dir)
			}
			return nil, err
		}
	}
	res, err := write(dir, files, Options{Fields: cfg.Fields}, mods)
	if err == nil && len(mods) > 0 {
		err = writeModFile(cfg.Dir, dir, mods, res)
	}
	if err != nil {
		if cfg.Work == "" {
			os.RemoveAll(dir)
		}
		return nil, err
	}
	return res, nil
}

// yieldDeps returns the import paths of package yield and of every package
// it imports, directly or not.
func yieldDeps(dir string, flags []string) (map[string]bool, error) {
	pkgs, err := packages.Load(&packages.Config{
		Mode:       packages.NeedName | packages.NeedImports | packages.NeedDeps,
		Dir:        dir,
		BuildFlags: flags,
	}, YieldPath)
	if err != nil {
		return nil, fmt.Errorf("instrument: loading %s: %w", YieldPath, err)
	}
	deps := map[string]bool{}
	var errs []error
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		deps[p.PkgPath] = true
		for _, e := range p.Errors {
			errs = append(errs, fmt.Errorf("instrument: loading %s: %v", YieldPath, e))
		}
	})
	return deps, errors.Join(errs...)
}

// A source is one file to rewrite, with the package it is checked in.
type source struct {
	path string
	file *ast.File
	pkg  *packages.Package
}

// sources returns the files of pkgs to rewrite, sorted by path: each
// source file of a package of the main module that is not in skip nor
// package yield's external test, is not the test main package go/packages
// synthesizes, and was not generated by cgo. A file
// in both a package and its test variant is rewritten once, checked in the
// variant with the most files, so the import name chosen for it is free in
// the test build as well.
func sources(pkgs []*packages.Package, skip map[string]bool, modules bool) []source {
	byPath := map[string]source{}
	for _, p := range pkgs {
		if p.Module == nil || (!p.Module.Main && !modules) || skip[p.PkgPath] || p.PkgPath == YieldPath+"_test" || strings.HasSuffix(p.ID, ".test") {
			continue
		}
		for _, f := range p.Syntax {
			path := p.Fset.File(f.FileStart).Name()
			if !slices.Contains(p.GoFiles, path) {
				continue // generated: by cgo, or the test main
			}
			if old, ok := byPath[path]; ok && len(old.pkg.Syntax) >= len(p.Syntax) {
				continue
			}
			byPath[path] = source{path: path, file: f, pkg: p}
		}
	}
	var list []source
	for _, s := range byPath {
		list = append(list, s)
	}
	slices.SortFunc(list, func(a, b source) int { return strings.Compare(a.path, b.path) })
	return list
}

// write rewrites files into dir with opt, each directory's in a
// subdirectory of its own under the file's own base name (the go command
// maps an overlay's directory back to the original one), and writes the
// overlay.
func write(dir string, files []source, opt Options, mods map[string]*copied) (*Result, error) {
	res := &Result{Overlay: filepath.Join(dir, "overlay.json"), Dir: dir}
	replace := map[string]string{}
	subdirs := map[string]string{}
	for _, s := range files {
		src, err := os.ReadFile(s.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a file with no source
		}
		if err != nil {
			return nil, fmt.Errorf("instrument: %w", err)
		}
		out, n, err := FileWith(s.pkg.Fset, s.file, src, s.pkg.TypesInfo, opt)
		if err != nil {
			return nil, err
		}
		if out == nil {
			continue
		}
		if c := mods[modKey(s.pkg.Module)]; c != nil {
			// A file of a copied module: rewritten in the copy.
			rel, err := filepath.Rel(c.from, s.path)
			if err != nil {
				return nil, fmt.Errorf("instrument: %w", err)
			}
			dst := filepath.Join(c.to, rel)
			os.Remove(dst) // a link to the module cache's read-only file
			if err := os.WriteFile(dst, out, 0o644); err != nil {
				return nil, fmt.Errorf("instrument: %w", err)
			}
			res.Files = append(res.Files, s.path)
			res.Points += n
			continue
		}
		sub, ok := subdirs[filepath.Dir(s.path)]
		if !ok {
			sub = filepath.Join(dir, strconv.Itoa(len(subdirs)))
			if err := os.Mkdir(sub, 0o755); err != nil {
				return nil, fmt.Errorf("instrument: %w", err)
			}
			subdirs[filepath.Dir(s.path)] = sub
		}
		rewritten := filepath.Join(sub, filepath.Base(s.path))
		if err := os.WriteFile(rewritten, out, 0o644); err != nil {
			return nil, fmt.Errorf("instrument: %w", err)
		}
		replace[s.path] = rewritten
		res.Files = append(res.Files, s.path)
		res.Points += n
	}
	overlay, err := json.MarshalIndent(struct{ Replace map[string]string }{replace}, "", "\t")
	if err != nil {
		return nil, fmt.Errorf("instrument: %w", err)
	}
	if err := os.WriteFile(res.Overlay, overlay, 0o644); err != nil {
		return nil, fmt.Errorf("instrument: %w", err)
	}
	return res, nil
}
