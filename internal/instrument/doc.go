// Package instrument rewrites the Go source of packages under test so that
// every synchronization operation passes through a hook of package
// github.com/retrybudget/retrybudget/yield, and hands the result to the go
// command as an overlay: the user's files are never touched.
//
// [Rewrite] loads packages by pattern (with go/packages), rewrites each
// file with [File], and writes the rewritten files and a
// `go test -overlay` file into a temporary directory. [File] rewrites one
// parsed, type-checked file; it identifies every operation by its types.Info
// objects, never by name, so import aliases, dot imports and promoted
// methods are found.
//
// What is rewritten (ryield is the import name of package yield, or
// ryield2 and so on when the file already uses that name):
//
//   - calls of the functions of sync/atomic get their first argument
//     wrapped: atomic.AddInt64(&n, 1) -> atomic.AddInt64(ryield.P(&n), 1);
//   - calls and method values of the methods of atomic.Int32, Int64,
//     Uint32, Uint64, Uintptr, Bool, Value and Pointer[T], and of
//     sync.Once's Do, get their receiver wrapped as a pointer:
//     b.n.Load() -> ryield.P(&b.n).Load(), o.Do(f) -> ryield.P(&o).Do(f);
//   - sync.Mutex's Lock, Unlock and TryLock go through ryield.M, and
//     sync.RWMutex's Lock, Unlock, RLock, RUnlock, TryLock, TryRLock and
//     RLocker through ryield.RW: b.mu.Lock() -> ryield.M(&b.mu).Lock(),
//     defer b.mu.Unlock() -> defer ryield.M(&b.mu).Unlock(). A receiver
//     reached through embedded fields is spelled with those fields:
//     b.Lock() -> ryield.M(&b.Mutex).Lock();
//   - channel sends ch <- v become ryield.Send(ch, v), with the element
//     type as a type argument when v's type differs from it
//     (ryield.Send[error](errs, &myErr{})); receives <-ch become
//     ryield.Recv(ch), and those of v, ok := <-ch, v, ok = <-ch and
//     var v, ok = <-ch become ryield.Recv2(ch);
//   - a select statement gets a yield point before it, and before its
//     labels if it has any: ryield.Point(); L: select { ... };
//   - every rewritten file gets the import on its package clause's line
//     and a marker, var _ = ryield.Mark(), on a line appended at its end.
//
// With [Options].Fields ([Config].Fields for [Rewrite]), the reads and
// writes of the fields of the struct types the file's package declares
// are yield points too, so that code with no synchronization at all, a
// plain b.tokens -= c from several goroutines, can be switched between a
// read and the write that depends on it. An access is a selector b.f of
// such a field followed by any further field selectors and index
// expressions (b.tokens, b.s.n, b.arr[i], b.m[k], b.pt.X); only a whole
// access counts, not its prefixes (b.s in b.s.n), and not one of a type of
// sync or sync/atomic, which their own rules rewrite. Then:
//
//   - an access read as a value is wrapped: x := b.tokens ->
//     x := ryield.P(b.tokens), where P yields after the read and before
//     the value is used;
//   - an assignment or an increment that stores into an access gets a
//     yield point before it, on its line, when it is a statement of a block
//     or a case body, and its store is moved after a yield point of its
//     own: b.tokens = x - c ->
//     ryield.Point(); b.tokens = ryield.P(x - c), with the field's type as
//     a type argument when the value's is another one
//     (ryield.P[error](&myErr{}), ryield.P[int64](0)) or as it is when that
//     type cannot be spelled in the file; an assignment of a value that is
//     itself an access has that read's P already;
//   - an assignment operation or an increment whose left-hand side is a
//     chain of field selectors of a variable is spelled as an assignment:
//     b.tokens -= c -> ryield.Point(); b.tokens = ryield.P(b.tokens - c),
//     b.tokens++ -> ryield.Point(); b.tokens = ryield.P(b.tokens + 1); other
//     ones (b.m[k]++, get(b).n -= c), which would evaluate their operands
//     twice, and assignments of several values only get the yield point
//     before them.
//
// Fields leaves the accesses that are not read as a value or that P
// cannot take: those assigned to, incremented or ranged into; operands of
// &; the bases of selectors, index and slice expressions (b.s.n, b.buf[:n],
// the receiver of b.clock.Now()); called functions (b.f()); composite
// literals' keys; the map index of v, ok := b.m[k]; the function
// expression of a go or defer statement (its arguments are rewritten);
// constant expressions (len(b.arr)) and the arguments of unsafe.Sizeof,
// Offsetof and Alignof. It leaves the assignments that are the init or
// post statements of if, for and switch statements, and select cases'
// communications (their reads are still wrapped). It leaves the fields of
// other packages' types, those of the other packages Rewrite rewrites
// included, unless reached from an access (p.X for p an *image.Point is
// left, b.pt.X for b.pt one of the package's fields is not); variables
// themselves, package-level or local (a field of one counts); and every
// field access in a _test.go file: test code's own fields are not the
// budget's. It does not tell a field that several goroutines share from
// one that only one goroutine ever sees, a local struct's included: every
// access counts, and runs that are not controlled pay a load of the
// active run at each.
//
// What is not: go statements (which are not yield points; the code they
// run is rewritten like any other), range over a channel, the
// communications of select cases themselves (their operands are
// rewritten), the other types of sync (WaitGroup, Cond, Map, Pool),
// operations through an interface (a sync.Locker), functions passed as
// values (f := atomic.AddInt64), assembly, files generated by cgo, the
// packages outside the patterns, the packages of other modules and of the
// standard library even when the patterns name them (the go command
// overlays no file of the module cache), and package yield and the
// packages it imports. An atomic
// call in a defer statement yields where the defer statement runs, where
// its arguments are evaluated. Code the rewriter cannot rewrite so that it
// still compiles is left as it is: a channel of a type parameter's type, a
// send whose element type cannot be spelled in the file, a two-value
// receive into a bool of another type, a receiver reached through an
// unexported field of another package.
//
// Line numbers are preserved: a rewrite is a set of insertions and small
// replacements in the original text, none of which adds or removes a
// newline, except the marker's line appended after the last. The rewritten
// file starts with a /*line*/ directive naming the original file, so
// compiler errors, stack traces and coverage name the original file and
// line.
package instrument
