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
//     Uint32, Uint64, Uintptr, Bool, Value and Pointer[T] get their
//     receiver wrapped as a pointer: b.n.Load() -> ryield.P(&b.n).Load(),
//     and sync.Once's Do goes through ryield.O: o.Do(f) -> ryield.Hook.O(&o).Do(f),
//     sync.WaitGroup's Go and Wait through ryield.WG:
//     wg.Go(f) -> ryield.Hook.WG(&wg).Go(f) (Add and Done stay as they are),
//     and sync.Cond's Wait, Signal and Broadcast through ryield.C:
//     b.cond.Wait() -> ryield.Hook.C(b.cond).Wait();
//   - sync.Mutex's Lock, Unlock and TryLock go through ryield.M, and
//     sync.RWMutex's Lock, Unlock, RLock, RUnlock, TryLock, TryRLock and
//     RLocker through ryield.RW: b.mu.Lock() -> ryield.Hook.M(&b.mu).Lock(),
//     defer b.mu.Unlock() -> defer ryield.Hook.M(&b.mu).Unlock(). A receiver
//     reached through embedded fields is spelled with those fields:
//     b.Lock() -> ryield.Hook.M(&b.Mutex).Lock();
//   - channel sends ch <- v become ryield.Send(ch, v), with the element
//     type as a type argument when v's type differs from it
//     (ryield.Send[error](errs, &myErr{})); receives <-ch become
//     ryield.Recv(ch), and those of v, ok := <-ch, v, ok = <-ch and
//     var v, ok = <-ch become ryield.Recv2(ch); a range over a channel
//     ranges over the function ryield.Range returns:
//     for v := range ch -> for v := range ryield.Range(ch);
//   - calls of the builtin close (not of a function that shadows it)
//     become ryield.Close: close(ch) -> ryield.Close(ch), defer close(ch)
//     -> defer ryield.Close(ch);
//   - calls of runtime.Gosched get the function wrapped in ryield.Spin,
//     which returns it, so the call is still made:
//     runtime.Gosched() -> ryield.Hook.Spin(runtime.Gosched)(); in a controlled
//     run the goroutine then counts as spinning and passes the baton on
//     (see package yield). The calls of go and defer statements
//     (go runtime.Gosched(), defer runtime.Gosched()) are left, the first
//     as its go statement is rewritten;
//   - calls of time.Sleep get the function wrapped in ryield.Sleeper,
//     which returns Hook.Sleep: time.Sleep(d) ->
//     ryield.Hook.Sleeper(time.Sleep)(d); under control the goroutine then
//     waits as on a timer's channel, passing the baton meanwhile, instead
//     of keeping it while it sleeps (the call of a go statement is left,
//     as its go statement is rewritten);
//   - a go statement starts its goroutine through ryield.Go, its function
//     value and arguments still evaluated by the goroutine that runs it,
//     in a block on the statement's lines:
//     go F(a, b) -> { ryield_f, ryield_0, ryield_1 := F, a, b; ryield.Hook.Go(func() { ryield_f(ryield_0, ryield_1) }) }.
//     What needs no evaluation is not bound but goes into the closure:
//     a declared function (f, pkg.F, g[int], and a generic g called
//     without type arguments, which := could not take), a constant or nil
//     argument (:= would give it its default type), a declared function
//     as an argument; a spread keeps its ...; with nothing to bind the
//     call goes as it is, go f(1) -> ryield.Hook.Go(func() { f(1) }), and a
//     call of a func() with no arguments goes as a value:
//     go func() { ... }() -> ryield.Hook.Go(func() { ... }),
//     go s.run() -> ryield.Hook.Go(s.run). A method value (x.m, bound as
//     ryield_f := x.m) takes its receiver, or &x, there, as the go
//     statement did. The temporaries are named ryield_ and a suffix, or
//     another prefix if a name of the file or the package starts so;
//   - a select statement with a communication becomes a switch on
//     ryield.Select (below); one that cannot be rewritten so (see what is
//     not), select {} and a select with only a default case get a yield
//     point before them, and before their labels if they have any:
//     ryield.Hook.Point(); L: select { ... };
//   - every rewritten file gets the import on its package clause's line
//     and a marker, var _ = ryield.Hook.Mark(), on a line appended at its end.
//
// A select statement becomes a switch whose init evaluates the channels
// and the values to send, once and in order, as entering the select did,
// and whose tag, ryield.Select, chooses the case; a case's receive assigns
// from what its case got:
//
//	select {                switch ryield_0, ryield_1, ryield_2 := ryield.R(a), ryield.S(b, x), ryield.R(c); ryield.Hook.Select(true, ryield_0, ryield_1, ryield_2) {
//	case v := <-a:          case 0: v := ryield_0.V;
//	case b <- x:       ->   case 1:
//	case w, ok = <-c:       case 2: w, ok = ryield_2.V, ryield_2.OK;
//	default:                default:
//	}                       }
//
// so break, continue and labels (L: select -> L: switch) mean what they
// meant. Without a default case, the last case is the switch's default
// (Select then never returns -1), so that a select that ended a function
// still does. A send whose value's type is not the element type gets it
// as a type argument, as Send does (ryield.S[error](errs, &myErr{})). The
// channel and value expressions move up to the switch's line, with their
// own rewrites; those of a case on another line follow a /*line*/
// directive naming their line, and another one after them names the
// select's again, so that a panic in them names its own line.
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
//     own, W, whose step is taken to touch shared memory unless a mutex is
//     held (a P's step after a read is taken to be local): b.tokens = x - c ->
//     ryield.Hook.Point(); b.tokens = ryield.W(x - c), with the field's type as
//     a type argument when the value's is another one
//     (ryield.W[error](&myErr{}), ryield.W[int64](0)) or as it is when that
//     type cannot be spelled in the file; an assignment of a value that is
//     itself an access has that read wrapped in W instead of P, and so do
//     the reads in the values of an assignment that W cannot wrap;
//   - an assignment operation or an increment whose left-hand side is a
//     chain of field selectors of a variable is spelled as an assignment:
//     b.tokens -= c -> ryield.Hook.Point(); b.tokens = ryield.W(b.tokens - c),
//     b.tokens++ -> ryield.Hook.Point(); b.tokens = ryield.W(b.tokens + 1); other
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
// What is not: the communications of the select statements that stay
// selects (their operands are rewritten), a range over or an operation on
// a channel whose type is a type parameter, WaitGroup's Add and Done, the
// other types of sync (Map, Pool), timers and tickers (a receive from a
// timer's channel is a receive), operations through an interface (a
// sync.Locker), functions passed as values (f := atomic.AddInt64,
// f := runtime.Gosched, f := time.Sleep: a goroutine under control that
// sleeps through one holds the baton meanwhile), assembly, files generated
// by cgo, the packages outside the patterns, the packages of other
// modules and of the standard library even when the patterns name them
// (the go command overlays no
// file of the module cache), package yield and the packages it imports,
// and the files that call yield's hooks themselves, where they want them
// (hand-instrumented code). An atomic call in a defer statement yields where the defer
// statement runs, where its arguments are evaluated; so does one that a
// go statement calls, go n.Add(1) -> { ryield_f := ryield.P(n).Add; ... }
// and go atomic.AddInt64(&n, 1) -> { ryield_0 := ryield.P(&n); ... }: the
// new goroutine runs the operation with no yield point before it. Code the
// rewriter cannot rewrite so that it still compiles is left as it is: a
// channel of a type parameter's type (its send, receive, close, or the
// select it is in), a send whose element type cannot be spelled in the
// file (and the select it is in), a two-value receive into a bool of
// another type (and the select it is in), a receiver reached through an
// unexported field of another package. So are go statements of a builtin
// (go println(x), go close(ch)), of f(g()) with g's results as the
// arguments, with an untyped argument that is not a constant (a
// comparison, an untyped shift, which := would make a bool or an int), or
// whose function or constant argument, which goes into the closure, spans
// lines; and the select statements whose case headers span lines, whose
// expressions could not move to the switch's line.
//
// Line numbers are preserved: a rewrite is a set of insertions and small
// replacements in the original text, none of which adds or removes a
// newline, except the marker's line appended after the last; the text that
// moves, a select's channel and value expressions and what a go statement
// puts into its closure, is on one line. The rewritten
// file starts with a /*line*/ directive naming the original file, so
// compiler errors, stack traces and coverage name the original file and
// line.
package instrument
