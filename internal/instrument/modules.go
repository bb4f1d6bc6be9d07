package instrument

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
	"golang.org/x/tools/go/packages"
)

// A copied module is a module of the module cache whose files are
// rewritten in a copy: from is its directory in the cache, to the copy's.
type copied struct {
	path, version string
	from, to      string
}

func modKey(m *packages.Module) string {
	if m == nil {
		return ""
	}
	return m.Path + "@" + m.Version
}

// copyModules copies into work/mod each module of the module cache that
// holds a file to rewrite. Files are hard-linked where the file system
// allows it (write removes a link before it writes a rewritten file) and
// copied where it does not.
func copyModules(dir, work string, files []source) (map[string]*copied, error) {
	cache, err := goEnv(dir, "GOMODCACHE")
	if err != nil {
		return nil, err
	}
	mods := map[string]*copied{}
	for _, s := range files {
		m := s.pkg.Module
		if m == nil || m.Main || m.Dir == "" || mods[modKey(m)] != nil || !within(cache, m.Dir) {
			continue
		}
		if m.Replace != nil && m.Replace.Version == "" {
			continue // replaced by a directory: overlaid
		}
		c := &copied{path: m.Path, version: m.Version, from: m.Dir,
			to: filepath.Join(work, "mod", strings.ReplaceAll(m.Path, "/", "_")+"@"+m.Version)}
		if m.Replace != nil {
			c.path, c.version = m.Replace.Path, m.Replace.Version
		}
		os.RemoveAll(c.to)
		if err := copyTree(c.from, c.to); err != nil {
			return nil, fmt.Errorf("instrument: copying module %s: %w", modKey(m), err)
		}
		if _, err := os.Stat(filepath.Join(c.to, "go.mod")); errors.Is(err, fs.ErrNotExist) {
			if err := os.WriteFile(filepath.Join(c.to, "go.mod"), []byte("module "+m.Path+"\n"), 0o644); err != nil {
				return nil, fmt.Errorf("instrument: %w", err)
			}
		}
		if err := raiseGoVersion(filepath.Join(c.to, "go.mod")); err != nil {
			return nil, err
		}
		c.path, c.version = m.Path, m.Version
		mods[modKey(m)] = c
	}
	return mods, nil
}

// within reports whether path is dir or beneath it.
func within(dir, path string) bool {
	if dir == "" {
		return false
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// copyTree copies the regular files of from into to, linking them where
// it can; the copies are writable.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if os.Link(path, dst) == nil {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// writeModFile writes work/go.mod, the main module's go.mod with a replace
// directive for each copied module, and work/go.sum, a copy of the main
// module's, and records them in res.
func writeModFile(dir, work string, mods map[string]*copied, res *Result) error {
	gomod, err := goEnv(dir, "GOMOD")
	if err != nil {
		return err
	}
	if gomod == "" || gomod == os.DevNull {
		return errors.New("instrument: rewriting another module's packages needs a main module (no go.mod found)")
	}
	data, err := os.ReadFile(gomod)
	if err != nil {
		return fmt.Errorf("instrument: %w", err)
	}
	f, err := modfile.Parse(gomod, data, nil)
	if err != nil {
		return fmt.Errorf("instrument: %w", err)
	}
	root := filepath.Dir(gomod)
	// Relative replacements name directories beside the main module's
	// go.mod; the new go.mod is elsewhere.
	for _, r := range f.Replace {
		if r.New.Version == "" && !filepath.IsAbs(r.New.Path) {
			if err := f.AddReplace(r.Old.Path, r.Old.Version, filepath.Join(root, r.New.Path), ""); err != nil {
				return fmt.Errorf("instrument: %w", err)
			}
		}
	}
	keys := make([]string, 0, len(mods))
	for k := range mods {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		c := mods[k]
		if err := f.AddReplace(c.path, c.version, c.to, ""); err != nil {
			return fmt.Errorf("instrument: %w", err)
		}
		res.Modules = append(res.Modules, k)
	}
	out, err := f.Format()
	if err != nil {
		return fmt.Errorf("instrument: %w", err)
	}
	res.ModFile = filepath.Join(work, "go.mod")
	if err := os.WriteFile(res.ModFile, out, 0o644); err != nil {
		return fmt.Errorf("instrument: %w", err)
	}
	sum, err := os.ReadFile(strings.TrimSuffix(gomod, ".mod") + ".sum")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("instrument: %w", err)
	}
	if err := os.WriteFile(filepath.Join(work, "go.sum"), sum, 0o644); err != nil {
		return fmt.Errorf("instrument: %w", err)
	}
	return nil
}

// goEnv returns one variable of go env, run in dir.
func goEnv(dir, name string) (string, error) {
	cmd := exec.Command("go", "env", name)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("instrument: go env %s: %v: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// rewriteGo is the language version a copied module is raised to when its
// go.mod says less (or nothing, which means go1.16): the rewritten code
// calls generic hooks, which need go1.18. It stays below go1.22, so that
// a loop variable keeps the meaning it had (one per loop, not one per
// iteration) and the copy behaves as the original.
const rewriteGo = "1.21"

// raiseGoVersion raises the go directive of the go.mod at path to
// rewriteGo when it is below go1.18 or missing; a module that already
// declares go1.18 or later is left as it is.
func raiseGoVersion(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("instrument: %w", err)
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		return fmt.Errorf("instrument: %w", err)
	}
	if f.Go != nil && semver.Compare("v"+f.Go.Version, "v1.18") >= 0 {
		return nil
	}
	if err := f.AddGoStmt(rewriteGo); err != nil {
		return fmt.Errorf("instrument: %w", err)
	}
	out, err := f.Format()
	if err != nil {
		return fmt.Errorf("instrument: %w", err)
	}
	return os.WriteFile(path, out, 0o644)
}
