package control

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/internal/instrument"
	"github.com/retrybudget/retrybudget/yield"
)

// version changes whenever what Binary builds changes for the same
// sources (the rewrite's rules), so that no older child is reused.
const version = "control-1"

// A Child is an instrumented test binary built from the sources of the
// running one.
type Child struct {
	Path     string        // the binary
	Built    bool          // built by this call, not found in the cache
	Took     time.Duration // what the build (or the cache lookup) took
	Points   int           // yield points in the rewritten files (0 when cached)
	Packages []string      // the packages asked to be rewritten
}

// An Uncontrolled error says why no child can be had: the verdict is then
// that of free runs only.
type Uncontrolled struct{ Why string }

func (u *Uncontrolled) Error() string { return "uncontrolled verdict: " + u.Why }

var (
	binMu    sync.Mutex
	binCache = map[string]*binResult{}
)

type binResult struct {
	once     sync.Once
	child    *Child
	err      error
	reported atomic.Bool
}

// Binary returns the instrumented child of the running test binary: the
// calling test's package (the current directory, where go test runs a
// test binary) rewritten, its tests included, with the packages named in
// pkgs, those of -budgettest.instrument, and the packages of the main
// module that the test imports, except the suite's own. Packages of other
// modules are rewritten in a copy (instrument.Config.Modules).
//
// The binary is built once with go test -c, without -race (under control
// one goroutine runs at a time and the race detector would see nothing),
// with the -tags the running binary was built with, and kept in the user's
// cache directory under the hash of the running binary and of what is
// rewritten: while the sources do not change, the running binary does not
// either, and a later go test finds the child there without rewriting or
// building. The cache keeps the 16 children used last, and any used in the
// last hour; each call marks its child used, and builds it again if
// another process removed it.
//
// The error is an *Uncontrolled when no child can be had: the code is
// instrumented already, there is no go command, the binary does not run in
// its package's directory (a test binary copied elsewhere), or the build
// fails.
func Binary(pkgs []string) (*Child, error) { return binary(pkgs, false) }

// binary is Binary; rebuilt says that it is called again because the
// child it had was removed.
func binary(pkgs []string, rebuilt bool) (*Child, error) {
	if yield.Instrumented() {
		return nil, &Uncontrolled{"the binary is instrumented already"}
	}
	b, err := loadBase()
	if err != nil {
		return nil, err
	}
	// Only what the base does not rewrite already makes another binary:
	// the subjects of one test package share one child.
	var extra []string
	for _, p := range append(slices.Clone(pkgs), splitList(*instrumentFlag)...) {
		p = strings.TrimSuffix(p, "_test")
		if p == "" || p == b.self || isSuite(p) || slices.Contains(b.patterns, p) {
			continue
		}
		extra = append(extra, p)
	}
	slices.Sort(extra)
	extra = slices.Compact(extra)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n", version, b.sum, runtime.Version(), strings.Join(extra, ","))
	key := hex.EncodeToString(h.Sum(nil))[:32]

	binMu.Lock()
	r := binCache[key]
	if r == nil {
		r = &binResult{}
		binCache[key] = r
	}
	binMu.Unlock()
	r.once.Do(func() { r.child, r.err = build(b, key, extra) })
	if r.child != nil {
		// A test process that runs for over an hour (go test -count=10 of
		// a large package) would see its child pruned by another go test
		// that builds children meanwhile: each use marks it used, and a
		// child removed all the same is built again.
		if _, err := os.Stat(r.child.Path); err != nil {
			binMu.Lock()
			if binCache[key] == r {
				delete(binCache, key)
			}
			binMu.Unlock()
			if rebuilt {
				return nil, &Uncontrolled{"the child built at " + r.child.Path + " is gone at once: " + err.Error()}
			}
			return binary(pkgs, true)
		}
		now := time.Now()
		os.Chtimes(filepath.Dir(r.child.Path), now, now)
	}
	if r.child != nil && r.reported.Swap(true) {
		c := *r.child
		c.Built = false // said once, by the first caller
		return &c, nil
	}
	return r.child, r.err
}

// Runs returns where the outcomes of runs this test process makes itself,
// rather than in a child, are saved for a later go test of the same
// sources (go test -race after go test): beside the children in the cache
// directory, under the build IDs that name them (see Binary), so that the
// same sources find them whatever the detector. Its Path names no binary:
// it is for OutcomeKey, SaveOutcome and SavedOutcome only. The error is an
// *Uncontrolled when the sources cannot be named.
func Runs() (*Child, error) {
	if yield.Instrumented() {
		return nil, &Uncontrolled{"the binary is instrumented: its runs are not those of its sources"}
	}
	b, err := loadBase()
	if err != nil {
		return nil, err
	}
	dir, err := cacheDir()
	if err != nil {
		return nil, &Uncontrolled{"no cache directory: " + err.Error()}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\nruns in process\n%s\n%s\n", version, b.sum, runtime.Version())
	d := filepath.Join(dir, "runs-"+hex.EncodeToString(h.Sum(nil))[:32])
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, &Uncontrolled{err.Error()}
	}
	now := time.Now()
	os.Chtimes(d, now, now) // used: see prune
	return &Child{Path: filepath.Join(d, "runs")}, nil
}

// A base is what every child of this binary shares: where it runs, what
// it was built with, and the packages rewritten for any subject.
type base struct {
	goCmd, wd, self, tags, sum string
	patterns                   []string // ".", then the main module's packages the test imports
}

var (
	baseOnce sync.Once
	baseVal  *base
	baseErr  error
)

func loadBase() (*base, error) {
	baseOnce.Do(func() { baseVal, baseErr = newBase() })
	return baseVal, baseErr
}

func newBase() (*base, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, &Uncontrolled{"the test binary cannot be found: " + err.Error()}
	}
	goCmd, err := goCommand()
	if err != nil {
		return nil, &Uncontrolled{err.Error()}
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, &Uncontrolled{err.Error()}
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return nil, &Uncontrolled{"the test binary has no build information"}
	}
	b := &base{goCmd: goCmd, wd: wd, self: strings.TrimSuffix(info.Path, ".test")}
	for _, s := range info.Settings {
		if s.Key == "-tags" {
			b.tags = s.Value
		}
	}
	// The child is built from the test's sources with its tags alone: the
	// build IDs of its packages, compiled without -race, name it, so that
	// go test -race finds the child go test built (and the outcomes it
	// saved, see SavedOutcome). Where they cannot be listed, the hash of
	// the running binary names it instead.
	ids := []string{"-deps", "-test", "-export", "-f", "{{.ImportPath}} {{.BuildID}}"}
	if b.tags != "" {
		ids = append(ids, "-tags="+b.tags)
	}
	if lines, err := goList(goCmd, wd, append(ids, ".")...); err == nil && len(lines) > 0 {
		h := sha256.New()
		fmt.Fprintf(h, "build IDs\n%s\n", strings.Join(lines, "\n"))
		b.sum = hex.EncodeToString(h.Sum(nil))
	} else if b.sum, err = fileHash(exe); err != nil {
		return nil, &Uncontrolled{"the test binary cannot be read: " + err.Error()}
	}
	listed, err := goList(goCmd, wd, "-f", "{{.ImportPath}}", ".")
	if err != nil {
		return nil, &Uncontrolled{fmt.Sprintf("the test binary of %s does not run beside its sources (go list . in %s: %v)", b.self, wd, err)}
	}
	if len(listed) != 1 || listed[0] != b.self {
		return nil, &Uncontrolled{fmt.Sprintf("the test binary of %s does not run in its package's directory (%s holds %s)", b.self, wd, strings.Join(listed, " "))}
	}
	args := []string{"-deps", "-test", "-f", "{{if .Module}}{{if .Module.Main}}{{.ImportPath}}{{end}}{{end}}"}
	if b.tags != "" {
		args = append(args, "-tags="+b.tags)
	}
	deps, err := goList(goCmd, wd, append(args, ".")...)
	if err != nil {
		return nil, &Uncontrolled{"listing the test's imports: " + err.Error()}
	}
	var pats []string
	for _, p := range deps {
		p, _, _ = strings.Cut(p, " ") // a test variant: "p [p.test]"
		if p == "" || strings.HasSuffix(p, ".test") || strings.HasSuffix(p, "_test") || p == b.self || isSuite(p) {
			continue
		}
		pats = append(pats, p)
	}
	slices.Sort(pats)
	b.patterns = append([]string{"."}, slices.Compact(pats)...)
	return b, nil
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func fileHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// cacheDir is where children are kept: $RETRYBUDGET_CACHE, or
// retrybudget/control in the user's cache directory, or, where there is
// none (no HOME, as on some CI machines), in the temporary directory.
func cacheDir() (string, error) {
	if d := os.Getenv("RETRYBUDGET_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "retrybudget-control"), nil
	}
	return filepath.Join(d, "retrybudget", "control"), nil
}

// goCommand returns the go command: the one on PATH, or the one in
// $GOROOT/bin.
func goCommand() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no go command on PATH or in $GOROOT/bin")
}

// suitePackages are the packages of this module that judge rather than
// are judged: never rewritten unless named.
var suitePackages = []string{
	"budgettest", "stress", "linearizability", "model", "yield", "internal/sched", "internal/fuzzops",
	"internal/harness", "internal/stressrun", "internal/seqcheck", "internal/instrument",
	"internal/matrix", "internal/control", "internal/simcases", "internal/sim", "internal/race",
}

const modulePath = "github.com/retrybudget/retrybudget"

func isSuite(path string) bool {
	rest, ok := strings.CutPrefix(path, modulePath+"/")
	return ok && (slices.Contains(suitePackages, rest) || strings.HasPrefix(rest, "cmd/"))
}

func build(b *base, key string, extra []string) (*Child, error) {
	start := time.Now()
	dir, err := cacheDir()
	if err != nil {
		return nil, &Uncontrolled{"no cache directory: " + err.Error()}
	}
	name := "child.test"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	patterns := append(slices.Clone(b.patterns), extra...)
	bin := filepath.Join(dir, key, name)
	if _, err := os.Stat(bin); err == nil {
		now := time.Now()
		os.Chtimes(filepath.Join(dir, key), now, now)
		return &Child{Path: bin, Took: time.Since(start), Packages: patterns}, nil
	}
	goCmd, wd, self, tags := b.goCmd, b.wd, b.self, b.tags

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, &Uncontrolled{err.Error()}
	}
	work, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return nil, &Uncontrolled{err.Error()}
	}
	defer os.RemoveAll(work)
	var tagList []string
	if tags != "" {
		tagList = strings.Split(tags, ",")
	}
	var testsOnly []string
	if isSuite(self) {
		testsOnly = []string{self} // this module's own tests of the suite
	}
	res, err := instrument.Rewrite(instrument.Config{Dir: wd, Patterns: patterns, Tags: tagList, Tests: true, Fields: true, Modules: true,
		TestsOnly: testsOnly, Work: filepath.Join(work, "src")})
	if err != nil {
		return nil, &Uncontrolled{"rewriting " + strings.Join(patterns, " ") + ": " + err.Error()}
	}
	out := filepath.Join(work, name)
	bargs := []string{"test", "-c", "-o", out, "-overlay", res.Overlay}
	if res.ModFile != "" {
		bargs = append(bargs, "-modfile", res.ModFile)
	}
	if tags != "" {
		bargs = append(bargs, "-tags="+tags)
	}
	cmd := exec.Command(goCmd, append(bargs, ".")...)
	cmd.Dir = wd
	var combined bytes.Buffer
	cmd.Stdout, cmd.Stderr = &combined, &combined
	if err := cmd.Run(); err != nil {
		return nil, &Uncontrolled{fmt.Sprintf("building the instrumented test binary: %v\n%s", err, strings.TrimSpace(combined.String()))}
	}
	if err := os.MkdirAll(filepath.Join(dir, key), 0o755); err != nil {
		return nil, &Uncontrolled{err.Error()}
	}
	if err := os.Rename(out, bin); err != nil {
		return nil, &Uncontrolled{err.Error()}
	}
	prune(dir, 16)
	return &Child{Path: bin, Built: true, Took: time.Since(start), Points: res.Points, Packages: patterns}, nil
}

// goList runs go list in dir and returns its lines.
func goList(goCmd, dir string, args ...string) ([]string, error) {
	cmd := exec.Command(goCmd, append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var lines []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// prune keeps the n children of dir used last, and those used in the last
// hour, and removes the build directories left by builds that died more
// than an hour ago.
func prune(dir string, n int) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type entry struct {
		name string
		at   time.Time
	}
	var kept []entry
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !e.IsDir() {
			continue
		}
		if strings.HasPrefix(e.Name(), "build-") {
			if time.Since(info.ModTime()) > time.Hour {
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
			continue
		}
		kept = append(kept, entry{e.Name(), info.ModTime()})
	}
	if len(kept) <= n {
		return
	}
	slices.SortFunc(kept, func(a, b entry) int { return b.at.Compare(a.at) })
	for _, e := range kept[n:] {
		// Not one that another test process may still be using.
		if time.Since(e.at) > time.Hour {
			os.RemoveAll(filepath.Join(dir, e.name))
		}
	}
}
