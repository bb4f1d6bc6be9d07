// Package budgettest is the conformance suite for retry budgets and retry
// loops: the checks of this module, run on your implementation from your
// own tests, as a CI gate.
//
// [Run] puts a budget through every check as subtests, against the
// sequential model it claims to follow; [Verify] returns the failures
// joined instead, and [VerifyCheck] runs one check. [Fuzz] is the Edges
// check as a go test -fuzz target. [RunLoop] puts a retry loop, through a
// small adapter (stress.Loop), through the sixteen loop checks of the stress
// package, each in a child process. See ExampleRun and ExampleRunLoop.
//
// Every failure is a [Failure] that names the rule broken and the line of
// this package that found it broken. The suite validates a [Subject] before
// any check runs, recovers every panic (the factory's, the budget's, the
// model's), times out every piece of a check, and closes every budget it
// builds: a bad subject fails with a rule of its own and never crashes or
// hangs the test binary.
//
// The project's own kill matrix (internal/subjects/mutants, printed by
// cmd/budgetcheck) runs through VerifyCheck: each deliberately broken
// budget is caught by the check that must catch it, and every reference
// budget passes every check.
//
// What each check does and what the suite can and cannot prove: see "The
// checks" below.
//
// # The checks
//
// Run runs these, in this order, as subtests named as the Check constants:
//
//   - Model: the model is deterministic (the same state and operation give
//     the same state and answer, two Inits are equal) and never panics, on
//     2000 random operations. Needs: Model.
//   - Sequential: a rapid state machine applies random operations, bursts of
//     one operation and trickles of small clock steps to the budget and to
//     the model, and fails on the first answer (or balance, when the model
//     is a model.Balanced and the budget has Available() float64) that
//     differs, shrunk to a short sequence. Then long runs (4 of 100,000
//     operations, 2 under -race) compare every answer and balance too:
//     phases of random mixes and of calls with a share of retries from none
//     (steady success) to all (an outage), asking for a retry at every edge
//     of the model (where one more success or clock step would change its
//     answer). They find arithmetic that parts from the model only after
//     hundreds of calls (a count in float64 rounding at a threshold); the
//     failure shows the shortest run it found in 3 s. One goroutine calls
//     the budget in them, so their verdict is its arithmetic, which the race
//     detector cannot change: under go test -race, long runs that passed
//     under go test on the same sources, call, flags, calls before and
//     environment are not made again (their saved pass is taken, and the
//     log says so; a failure is never saved). Needs: Model; Scale
//     for time. When the state machine fails, rapid writes a fail file
//     under testdata/rapid/<TestName>/ in your package, as for any rapid
//     test: replay it with -rapid.failfile=<path>, or keep it out of your
//     tree with -rapid.nofailfile or a .gitignore line.
//   - Linearizable: Scenarios concurrent histories (4 goroutines of 100
//     operations, and a clock goroutine when Scale is set) are recorded and
//     checked against the model with porcupine. A violation is narrowed to
//     the operations around it, minimized, explained, and saved as HTML and
//     JSON under t.ArtifactDir(). A search that times out fails as
//     inconclusive, never passes. Its controlled stage (see "Controlled
//     schedules on plain go test" below: the exhaustive stage, then random ones) runs first: every
//     scenario under -budgettest.schedules controlled schedules (the
//     scheduler behind package yield), with the budget built inside the controlled run so that the
//     goroutines its factory starts are scheduled too. A violation is
//     minimized on fixed schedules, its schedule is shrunk to fewer
//     preemptions, and the failure prints the -budgettest.replay flag that
//     replays it exactly. Then each scenario runs once freely.
//   - Race: 64 goroutines call the budget at once, with GOMAXPROCS raised to
//     at least 8. For most models only the race detector sees what goes
//     wrong here: run go test -race; without it the check finds panics,
//     deadlocks and calls too slow to finish. For an in-flight model
//     (model.InFlightLimit) the run is the in-flight stress run, whose
//     limit on the retries in flight is checked at every grant, with or
//     without -race. It always runs freely: under control every switch
//     between goroutines is a synchronization, and the detector would see
//     none. Under -race it runs in a child process of the test binary, and
//     the detector's reports come back as one Failure: how many, each pair
//     of sites once, and the first report in full. The checks that call
//     the budget from many goroutines (all but Model and Sequential) run
//     in such a child too, until the Race check of the same Run or Verify
//     has found the budget free of races: the races they meet are added
//     to their failure, each pair of sites once, so that no raw report
//     comes before the suite's verdict.
//     A budget that is only slow under contention (a FIFO spin lock on
//     oversubscribed cores under -race) is not stuck: a stress run stops
//     starting calls after a third of Watchdog (10 s at most), and is
//     checked on the calls it made; the log says it was cut short.
//   - Invariant: for any model, two burst runs: many goroutines make the
//     same call at once, and since every order of identical calls is the
//     same sequence, the budget must grant exactly what the model grants
//     for that many calls (no more: a check-then-act; no fewer: a lost
//     credit) and end in the model's state. Between bursts the budget is
//     walked, one call at a time, to an edge (drained, full, a credit
//     off), two goroutines duel there, and now and then a burst is a
//     volume of 70,000 calls at one instant. Then, for the model package's
//     models, three stress runs checked against the family's conservation
//     invariant at every grant (a token bucket never grants more than its
//     balance and credits, a ratio never more than its window allows, a
//     throttle never at or below half its maximum). Those stress runs have
//     a controlled stage, which runs first: one schedule of each strategy
//     per seed, on 4 goroutines of 20 calls a phase, and a failure names
//     the schedule. Under -race one free stress run is made instead of
//     three: the detector makes each five to ten times slower.
//   - Leak: after 200 calls and Close, no goroutine the budget started is
//     left, waited for up to 5 s. The budget's goroutines are told from
//     others by a profiler label that Go hands down to every goroutine
//     started under it, so a test running in parallel that starts
//     goroutines meanwhile is no leak of the budget's. A budget that
//     replaces its goroutines' labels (pprof.SetGoroutineLabels) hides
//     what they start. On the wall clock the synctest bubble checks.
//     Then, for a budget with Close() error, a fresh one is called by 4
//     goroutines, 20 calls each before Close starts, on while it runs and
//     30 each after: every call returns within 10 s without panicking,
//     and no goroutine is left (package budget, "Closing a budget").
//   - Replay: fixed edge-case sequences replayed against the model: a
//     drain; 140,000 calls at one instant; refill fractions; and, each on a
//     budget of its own, clock jumps beside the overflow thresholds of
//     elapsed × rate and across every order of magnitude to 2^62, and
//     idle gaps after a drain where narrow counters of time wrap: 2^15 to
//     2^33 slot widths, windows, milliseconds and seconds (a slot tag of
//     16 bits aliases after 2^16 slots, a tick of 32 bits of milliseconds
//     after 49.7 days), 2^31 to 2^33 nanoseconds and microseconds. For an
//     in-flight budget (a structured model), calls and retries held in
//     flight across idle gaps of a minute, five, an hour and a day (a
//     second past each) and 2^15 to 2^33 milliseconds and seconds: a
//     budget that drops or resets idle state while calls are in flight
//     grants a retry the model denies. One goroutine calls the budget, as
//     in the long runs: under go test -race a pass of go test on the same
//     sources is taken in the same way.
//   - Edges: the budget built on a clock that starts at instants where slot
//     arithmetic breaks (negative ones, the ends of int64), then driven
//     across slot boundaries. Needs: a model.Starter to start anywhere but
//     0; skipped on the wall clock, which cannot be set. Fuzz runs the same
//     target under go test -fuzz.
//   - Amplification: a simulated 100% outage (the module's outage simulation), in which the
//     budget may grant no more retries than its model does: it catches a
//     budget built per call site and a refund that keeps it from draining.
//     For an in-flight model every attempt of the outage takes 1s, so that
//     calls are in flight long enough to be limited.
//
// A model that is model.Structured (an in-flight budget's, such as
// model.InFlight) changes what the checks draw: whole calls, as a retry
// loop makes them, with AttemptEnd and CallEnd, so that nothing ends that
// never started, and the minimizer keeps that structure. Its budget must
// be a budget.InFlightBudget, or the subject is turned away. The
// Linearizable check's scenarios then start with calls and retries left in
// flight; Race and Invariant, for a model that is also a
// model.InFlightLimit, run the in-flight stress instead of the families'
// runs: 64 goroutines make calls while the retries surely in flight are
// held to the rule's limit at every grant; with only a background in
// flight the budget must grant what the model grants (a leaked or doubly
// released permit shows there); and two calls on two cores ask at once for
// the one slot left, round after round until 5,000 rounds had them
// overlap (3s at most), where a second grant is a check-then-act, minimized
// to the fewest calls in flight. Leak makes whole calls and Replay ramps the
// calls in flight up to hundreds and back. The Model check draws calls too,
// and Reset for a model.Resetter.
//
// A keyed budget (one budget per host or tenant, a bounded number of keys
// held, as budget.Keyed holds them) is checked one key at a time with
// Keyed as its factory: each budget the suite builds is one key of a fresh
// keyed budget, and before each of its calls Keyed calls as many other
// keys as the keyed budget may hold, so that every call makes it drop a
// key. The model is the rule of one key, and every check holds the key to
// it while the keys around it come and go: a keyed budget that drops a
// key a call still holds (and loses the call's charge, or its count of
// calls in flight) grants a retry the model denies.
//
// A subject that fails validation, or a factory that fails on its first
// call, gets one Failure and no checks. A panic in the budget, a call that
// never returns (after Watchdog) and a leaked goroutine are Failures with
// rules of their own; none crashes the test binary.
//
// What the suite can and cannot prove. A failure is real: every check
// compares the budget with its model on something the budget did. A pass
// is evidence, not proof: the controlled stages explore a fixed set of
// schedules, not every schedule, and the free runs see only the
// interleavings that happened, so run under -race too. A budget that
// deadlocks fails by the watchdog, and its stuck goroutines are left
// behind.
//
// # Which model is my rule?
//
// Quantities of the token models are in milli-tokens. Each line is an
// Example of package model:
//
//   - the bucket of the article "Retry budgets by language" (capacity 40,
//     refill 1/s, 1 per retry, +0.1 per success, no refund):
//     model.TokenBucket{Capacity: 40_000, TransientCost: 1_000,
//     ThrottledCost: 1_000, SuccessBonus: 100, RefillPerSecond: 1_000,
//     NoRefund: true} (Example_articleBucket);
//   - the AWS SDK for Go v2's retry quota: model.AWS() (Example_awsSDK);
//   - gRPC's retry throttling (gRFC A6), maxTokens 10, tokenRatio 0.1:
//     model.Throttle{Max: 10_000, Ratio: 100} (Example_gRPCThrottle);
//   - the Google SRE book's ratio with a floor: model.SRE()
//     (Example_googleSRE);
//   - Envoy's retry_budget, and Istio's retryBudget that configures it:
//     model.EnvoyDefaults(), or model.InFlight with your percent and
//     floor (Example_envoyRetryBudget);
//   - failsafe-go's budget: model.FailsafeDefaults() (Example_failsafeGo);
//   - Finagle's RetryBudget (percentCanRetry of the requests of the last
//     ttl, plus minRetriesPerSec × ttl): model.Ratio{PPM: 200_000, Window:
//     10 * time.Second, Slots: 10, Reserve: 100} for its defaults, which
//     budget.RatioConfig with the same Reserve runs (model's
//     ExampleRatio_finagle);
//   - tower's TpsBudget documents Finagle's rule, which model.Ratio with a
//     Reserve is; a port of tower's own code needs a model of its own (its
//     window is not Ratio's), which Example_writingAModel writes (see
//     "Writing a model for your budget").
//
// # Controlled schedules on plain go test
//
// A check-then-act goes wrong in a window of nanoseconds, and whether two
// goroutines land in it is up to the Go scheduler: on a busy machine such
// a bug passes some runs. So the Linearizable and Invariant checks, and
// the loop checks of RunLoop whose cases run goroutines of their own, have
// a controlled stage, in which the goroutines run one at a time and a
// seeded scheduler (package yield) picks who runs at every synchronization
// point. The same seeds explore the same schedules: a budget it fails
// fails the same way on every run, with a -budgettest.replay flag that
// replays the schedule.
//
// Control needs the code rewritten, so that every sync/atomic call, lock,
// channel operation and field access calls package yield. go test builds
// the code as it is, so the suite does the rest itself, with no second
// command: the first time a check needs it, it rewrites the calling test's
// package, the packages of the budget's type and of the values it holds
// (an adapter's wrapped budget, in another module too), the packages of the
// main module the test imports, and those of -budgettest.instrument; it
// builds that test binary once with go test -c; and it runs the check's
// controlled stage in it as a child process, which runs the same test and
// the same call, and sends its verdict back. The child runs your test's
// code up to that call, so a server your test starts before it is started
// there too; once the verdict is sent the child ends the test (skipped),
// so its cleanups and TestMain's teardown run before it exits, and stop
// that server. The parent then runs the
// check's free stage, which sees data races under -race. The child binary
// is kept in the user's cache directory under the build IDs of the test's
// packages, compiled without -race: a second go test of unchanged sources
// builds and rewrites nothing, and go test -race finds the child go test
// built. That child is built without the race detector, so under go test
// -race a controlled stage that passed under go test, on the same call,
// flags, calls before, environment and GOMAXPROCS, is not run again: its
// saved pass is taken, and the log says so (a failure always runs again).
// A budget in the module cache is rewritten in a copy of its
// module, named by a temporary go.mod passed as -modfile; your go.mod and
// go.sum are never touched.
//
// The Linearizable check's controlled stage begins with an exhaustive
// stage: small scenarios at the edges the model shows (the last retry, none
// left, as much as the budget holds, time gone by; for an in-flight budget
// the calls in flight at which one more allows one retry more) are run
// under every schedule with at most two
// preemptions, pruned by sleep sets (see linearizability.Search). A pass
// then means no violation in any schedule within that bound of those
// scenarios. Then the small ones (done in at most 300 schedules) run again
// under every schedule with at most three preemptions inside calls (a
// switch at a goroutine between two of its calls is free), one of them
// made for a call that three updates overtake; a pass covers those
// schedules too, of the scenarios complete at three. The stage's limits
// are counts: 5,000 schedules a scenario, 40,000 a stage at two, and
// 5,000 a scenario, 20,000 in all at three, so that a loaded machine runs
// what an idle one does, and a guard of 2 minutes that only a budget
// whose calls are slow meets. On go test -v one line a bound says how
// much ran ("exhaustive stage: 21 of 23 scenarios complete, 2 cut short,
// 0 not run; 21355 schedules in 1m24s (limits: ...)", "exhaustive stage
// at 3 preemptions inside calls: 9 of 9 small scenarios complete, ..."),
// and a line names each scenario cut short or not run at two.
// Steps inside a critical section are
// taken to commute with other goroutines' steps only until a run shows an
// operation storing into a field outside any lock, a sign of a data race;
// the search then starts again without that reduction, and the log says
// so. The schedules closest to the serial order run first. A violation it
// finds names the scenario and the number of schedules run. The random
// schedules follow it.
//
// A controlled failure tells how the calls met in the budget's own lines:
// the shrunk schedule is replayed once more, traced, and each switch is
// printed with the goroutine, the call it was in, and the file:line,
// function and source line where it was preempted and where it resumed,
// with each call's answer and, where it differs, the model's
// (linearizability.Search tells it). No -race is needed for it.
//
// This route was chosen over rewriting at compile time (-toolexec, which
// every go test would have to be given) and over running go test again
// on an overlay (which builds and runs every test twice): it needs nothing
// from the user, and its cost after the first build is the child's
// start-up, tens of milliseconds.
//
// Where no child can be had (no go command, a test binary copied away
// from its sources, a build that fails), or with -budgettest.control=off,
// the check says in one line, in the test log and once on standard
// error, that its verdict is uncontrolled: free runs only.
// -budgettest.control=require makes that a failure, for a CI gate that
// must not pass on luck. The flags of this family, the one policy for
// every controlled run, are -budgettest.control, -budgettest.schedules
// (default 8 per scenario, stress run or loop case), -budgettest.seed,
// -budgettest.replay and -budgettest.instrument.
// cmd/budgetcheck runs the rewritten code directly, for a replay, a
// profile or -json output.
//
// A budget that does much work under its lock (a recount of its slots)
// takes many steps: a run past its step bound goes on freely and is read
// as a free run, never called a livelock; a call that does not return is
// the watchdog's, which fires after a minute in which no call of the
// budget returned. A controlled run whose goroutines stay blocked outside
// instrumented code (a pipe, a socket, a lock of code that is not
// rewritten) falls back to free running; the search then stops
// controlling the rest of its runs, and says so in one line. For a budget
// whose state is in another process, set Subject.Remote.
//
// A controlled pass means no violation in the schedules explored, not in
// every schedule.
//
// # A quicker verdict: go test -short
//
// Under -short the checks make fewer of their free runs, as many as under
// -race: the Linearizable check runs 10 random scenarios instead of 50
// (Subject.Scenarios, if set, wins), the Invariant check one family of
// stress runs instead of three, and the Sequential check two long runs
// instead of four. The exhaustive stage runs whole, with the same
// scenarios, bounds and limits, as do the controlled stress runs. What
// -short gives up is the random scenarios' and the free runs' reach: a
// bug that only a longer random history shows (a slot that drifts after
// thousands of operations), or only one of the other stress families, may
// pass -short and fail without it. Keep a run without -short in CI.
//
// # Writing a model for your budget
//
// When none of the model package's models states your budget's rule, write
// one: a type that implements [model.Model] for a state type S of its own.
// A model is the budget's rule with nothing else in it: no locks, no
// atomics, no clock of its own. Init returns the state of a new budget,
// and Step(s, op) returns the next state and, for a Retry, the answer. Step
// is a pure function of its arguments, and states are values: Step must
// never change the state it is given, since the Linearizable check keeps
// old states and steps each of them many times. Keep fixed-size arrays
// rather than slices and maps, or copy before you write.
//
// Abilities are optional interfaces of the model package, found by type
// assertion; each buys a check, or a sharper one:
//
//   - [model.Validator]: Validate rejects parameters the model cannot work
//     with, before any check runs, instead of a crash in the middle of one.
//   - [model.Timed]: Timing gives the clock steps that matter, a slot width
//     and a window, so that a Subject need not set Scale and Horizon. A
//     model whose answers depend on time and that has neither fails the
//     subject.
//   - [model.Balanced]: Balance is compared, after every operation, with
//     the budget's Available() float64 when it has one: a state gone wrong
//     shows before any answer does.
//   - [model.Starter]: InitAt lets the Edges check start the budget on a
//     clock reading negative instants and the ends of int64.
//   - [model.Resetter]: only a model that has it is given Reset, the loss
//     of state of a budget kept in a store that restarts; Step of any
//     other model never sees it.
//   - [model.Structured] and [model.InFlightLimit], for a budget that
//     counts work in flight: the first makes the checks draw whole calls
//     and send AttemptEnd and CallEnd, the second gives the Race check the
//     bound to hold at every grant.
//
// Time is data. The state holds a [model.Clock]; Step answers Advance with
// [model.Clock.Advance] and changes nothing else. An operation that, in
// the budget, reads the clock calls [model.Clock.Observe] first and
// measures the time passed from the old Seen to the new one. Observe is the
// forward-only rule: a reading behind the latest one seen counts as the
// latest, so a clock stepped back neither refills nor expires anything
// twice.
//
// Equal(a, b) means that a and b behave the same from now on: every
// sequence of operations gets the same answers from both. Plain == on S
// says just that when Step keeps one representation per behaviour: slots
// in age order rather than in a ring, expired counts dropped, a full
// bucket without a fraction. Otherwise compare only what matters. An
// Equal stricter than behaviour is safe and only slows the Linearizable
// search; a looser one can pass a history that is not linearizable. Hash
// hashes the fields Equal compares, with [model.Hash].
//
// Answer every input, and say how in Step's documentation: a Retry of a
// kind that is not a retry kind is denied and changes nothing, as the
// Budget contract says; an in-flight model ignores the end of something
// that never started. Step must never panic: a minimized counterexample
// may hold input the checks never draw on their own.
//
// The Model check, the first that Run runs, checks the model itself: two
// Inits are Equal, the same state and operation give Equal states, equal
// hashes and the same answer, and nothing panics, over 2000 operations.
// It cannot tell whether the model states the rule you meant: give the
// model tests of its own, from the rule's documentation; the other checks
// then fail a budget wherever it and the model part.
//
// The package example WritingAModel (Example_writingAModel, in
// example_model_test.go) is a worked one: a Go port of tower's TpsBudget
// (tower/src/retry/budget/tps_budget.rs), a model of the rule it
// documents, each of these decisions explained, and the suite catching
// tower issue #857: a retry_percent of 0.3 that allows a third of the
// requests.
package budgettest
