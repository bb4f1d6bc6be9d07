package redisbudget

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"net"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
	"weak"

	"github.com/redis/go-redis/v9"

	"github.com/retrybudget/retrybudget/budget"
)

//go:embed tokenbucket.lua
var tokenBucketLua string

//go:embed ratio.lua
var ratioLua string

var (
	tokenBucketScript = redis.NewScript(tokenBucketLua)
	ratioScript       = redis.NewScript(ratioLua)
)

// ErrUnavailable wraps the error of a call that did not reach Redis or
// got no answer in time: a refused or lost connection, a timeout, a server
// that is loading or read-only. Its cause is in the chain: for a call that
// timed out while the client could not connect, the dial's error as well
// as the context's.
var ErrUnavailable = errors.New("redisbudget: redis unavailable")

// ErrCorrupt wraps the error of a call that Redis answered with a refusal
// that retrying will not cure: the budget's key holds another type of
// value (WRONGTYPE), or the ClockKey is missing or does not hold a number.
// Its cause is in the chain.
var ErrCorrupt = errors.New("redisbudget: budget state corrupt")

// ErrConfigMismatch wraps the error of a call to a budget key that a
// process with another configuration made: two deployments share a Name
// but not their settings. The error names both configurations. Change the
// Name along with the settings (or delete the key) to start a budget anew.
var ErrConfigMismatch = errors.New("redisbudget: budget made with another configuration")

// sentinel returns the sentinel for err: ErrCorrupt or ErrConfigMismatch
// if Redis refused the call for the state it found, and ErrUnavailable
// otherwise.
func sentinel(err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		switch msg := re.Error(); {
		case strings.HasPrefix(msg, "WRONGTYPE"), strings.HasPrefix(msg, "CORRUPT"):
			return ErrCorrupt
		case strings.HasPrefix(msg, "MISMATCH"):
			return ErrConfigMismatch
		}
	}
	return ErrUnavailable
}

// A dialWatch is a go-redis hook that remembers whether the latest dial of
// a client's connections failed, and why. A call that waits for a
// connection while go-redis redials in the background ends with only its
// context's error ("context deadline exceeded"); the dial's own error
// (connection refused, no such host) is what the caller needs to see.
type dialWatch struct {
	last atomic.Pointer[error] // nil after a dial that worked
}

func (w *dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			w.last.Store(&err)
		} else {
			w.last.Store(nil)
		}
		return c, err
	}
}

func (w *dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (w *dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// watch returns the dialWatch of client, adding it as a hook the first
// time a constructor sees the client: on the client itself, and on each
// node a cluster or ring client makes from then on. A client gets one hook
// however many budgets are built on it; go-redis cannot remove a hook, and
// one per budget made a program that builds budgets as it goes (one per
// tenant, say) pay for every one it ever built, in memory and in the time
// each AddHook takes to copy the list.
func watch(client redis.UniversalClient) *dialWatch {
	v := reflect.ValueOf(client)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return hook(client) // a client that is not a pointer has no identity to key on
	}
	p := (*byte)(v.UnsafePointer())
	key := uintptr(unsafe.Pointer(p)) // not a reference: the client can still be collected
	for {
		e, ok := watches.Load(key)
		if ok && e.(watchEntry).client.Value() == p {
			return e.(watchEntry).w
		}
		// No entry, or the entry of a collected client that had the
		// same address: replace it.
		fresh := watchEntry{client: weak.Make(p), w: new(dialWatch)}
		var won bool
		if ok {
			won = watches.CompareAndSwap(key, e, fresh)
		} else {
			_, loaded := watches.LoadOrStore(key, fresh)
			won = !loaded
		}
		if !won {
			continue // another constructor got there first: take its entry
		}
		addHook(client, fresh.w)
		runtime.AddCleanup(p, func(key uintptr) { watches.CompareAndDelete(key, fresh) }, key)
		return fresh.w
	}
}

// watches maps a client's address to its watchEntry.
var watches sync.Map

// A watchEntry is the dialWatch of a client, with a weak pointer that
// tells the client from a later one at the same address.
type watchEntry struct {
	client weak.Pointer[byte]
	w      *dialWatch
}

// hook adds a new dialWatch to client and returns it.
func hook(client redis.UniversalClient) *dialWatch {
	w := new(dialWatch)
	addHook(client, w)
	return w
}

func addHook(client redis.UniversalClient, w *dialWatch) {
	if nodes, ok := client.(interface{ OnNewNode(func(*redis.Client)) }); ok {
		nodes.OnNewNode(func(c *redis.Client) { c.AddHook(w) })
	} else {
		client.AddHook(w)
	}
}

// failure is the error of a failed call: the sentinel, what the call was,
// and Redis's or the network's error, joined, for a call that timed out,
// with the latest failed dial's error.
func failure(w *dialWatch, op, key string, err error) error {
	if p := w.last.Load(); p != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return fmt.Errorf("%w: %s %s: %w (the latest dial failed: %w)", ErrUnavailable, op, key, err, *p)
	}
	return fmt.Errorf("%w: %s %s: %w", sentinel(err), op, key, err)
}

// Config is what both budgets need besides their algorithm's settings.
type Config struct {
	// Client talks to Redis. Its own retries must be off (MaxRetries: -1;
	// for a *redis.ClusterClient MaxRedirects: -1 too), or the
	// constructors return an error: a script whose reply was lost would be
	// sent again and applied twice. On a cluster, a call after a failover
	// then fails once with MOVED (ErrUnavailable), and the next goes to the
	// new master; after a master dies, which sends no MOVED, go-redis
	// finds the new one only at its next ClusterStateReloadInterval (60s by
	// default), so set that to a few seconds. The first constructor given
	// a client adds one hook to it (to a cluster's or ring's nodes, those
	// made from then on), shared by every budget built on it, that watches
	// its dials, so that a call that timed out while the client could not
	// connect names the dial's error.
	Client redis.UniversalClient
	// Name identifies the budget: every process that shares it uses the
	// same Name. The key is "retrybudget:{Name}:tb" or ":ratio".
	Name string
	// CallTimeout bounds each call to Redis. Zero means 100ms.
	CallTimeout time.Duration
	// IdleTTL is how long a budget's key lives without calls; an expired
	// budget starts again as new. Zero means one hour; other values under
	// one second are rejected.
	IdleTTL time.Duration
	// Clock, if set, replaces the server's TIME: for tests. It is read in
	// the process before each call and sent with it, so a step of it
	// concurrent with a call can reach the server in either order; an
	// instant earlier than the latest the budget has seen counts as that
	// one, so either order is one the call could have had. This is the
	// clock to give a budgettest.Subject's factory (see
	// Example_conformanceSuite). Any reading of int64 is exact: the
	// scripts keep time in seconds from an origin. ClockKey is the
	// alternative for processes that share a budget. In production leave
	// both unset, so that the whole fleet reads one clock, inside each
	// call.
	Clock budget.Clock
	// ClockKey, if set, names a Redis key holding the time in nanoseconds,
	// which the scripts read inside each call: a test clock that the whole
	// fleet shares, stepped with INCRBY. On a cluster it must carry the
	// budget's hash tag, "{Name}", to be in the budget's slot.
	ClockKey string
	// OnError, if set, is called with every failed call's error.
	OnError func(error)
	// FleetSize, if positive, opts into a fallback when Redis fails: a
	// local budget with 1/FleetSize of the capacity and the refill (or of
	// the floor and the reserve, rounded down) decides instead of a plain
	// denial. It never grants more than that share: a kind of retry that
	// costs more than the share is denied. Zero fails closed.
	FleetSize int

	// seen, with Clock, is the latest reading this budget has sent: a call
	// sends no earlier one (see now).
	seen *atomic.Int64
}

// retries returns the option by which client resends a failed command, and
// its value; a client of a type it does not know is taken as not resending.
// A cluster client resends a command that timed out or lost its connection
// up to MaxRedirects times (on another node, too), MOVED or not.
func retries(client redis.UniversalClient) (string, int) {
	switch c := client.(type) {
	case *redis.Client:
		return "MaxRetries", c.Options().MaxRetries
	case *redis.Ring:
		return "MaxRetries", c.Options().MaxRetries
	case *redis.ClusterClient:
		if n := c.Options().MaxRetries; n > 0 {
			return "MaxRetries", n
		}
		return "MaxRedirects", c.Options().MaxRedirects
	}
	return "", 0
}

// hashTag returns the part of key that Redis Cluster hashes: what lies
// between the first "{" and the next "}", if that is not empty, or the
// whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// minIdleTTL is the shortest IdleTTL a Config takes (Config.IdleTTL says so). The scripts give
// Redis the TTL in whole milliseconds, so one under 1ms expired the key at
// once and turned the budget off; a TTL a little over that is still a
// likely slip of units (IdleTTL: 3600, meant as seconds, is 3.6µs), and a
// budget that forgets its state within a second between calls does not
// limit anything.
const minIdleTTL = time.Second

func (c *Config) check() error {
	bad := func(field string, value any, want string) error {
		return &budget.ConfigError{Field: "redisbudget.Config." + field, Value: fmt.Sprint(value), Want: want}
	}
	switch {
	case c.Client == nil:
		return bad("Client", "nil", "set")
	case c.Name == "":
		return bad("Name", `""`, "set")
	case c.CallTimeout < 0:
		return bad("CallTimeout", c.CallTimeout, ">= 0 (0 is 100ms)")
	case c.IdleTTL < 0 || c.IdleTTL > 0 && c.IdleTTL < minIdleTTL:
		return bad("IdleTTL", c.IdleTTL, "0 (one hour) or at least "+minIdleTTL.String())
	case c.FleetSize < 0:
		return bad("FleetSize", c.FleetSize, ">= 0")
	}
	if what, n := retries(c.Client); n > 0 {
		return bad("Client", fmt.Sprintf("a client with %s %d", what, n),
			"a client that does not resend a command ("+what+": -1): a script whose reply was lost would be applied twice")
	}
	if _, ok := c.Client.(*redis.ClusterClient); ok && c.ClockKey != "" && hashTag(c.ClockKey) != c.Name {
		return bad("ClockKey", c.ClockKey, "a key with the hash tag {"+c.Name+"} on a cluster, in the budget's slot")
	}
	if c.Clock != nil {
		// The budget observes the clock when it is made, as a local one
		// does: an earlier reading sent later counts as this one.
		c.seen = new(atomic.Int64)
		c.seen.Store(int64(c.Clock.Now()))
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 100 * time.Millisecond
	}
	if c.IdleTTL == 0 {
		c.IdleTTL = time.Hour
	}
	return nil
}

// now is the caller's clock reading for a script, "" for the server's:
// "sec nsec mod", the reading's whole seconds and nanoseconds (floored, so
// nsec is in [0, 1e9)) and, for a slot width, the reading modulo width
// (floored; 0 without one). A script keeps instants in seconds from an
// origin, as it does the server's TIME, so that every number it handles
// stays below 2^53, which Lua's doubles hold exactly, wherever in int64
// the clock reads; mod places the slot boundaries across a step too far
// for that.
func (c *Config) now(width int64) string {
	if c.Clock == nil {
		return ""
	}
	n := int64(c.Clock.Now())
	if c.seen != nil {
		// No reading earlier than one this budget saw: the key, made by
		// the first call, then begins at the budget's construction, and
		// a clock that went back counts as the latest instant seen, as
		// the scripts count it.
		for {
			s := c.seen.Load()
			if n <= s {
				n = s
				break
			}
			if c.seen.CompareAndSwap(s, n) {
				break
			}
		}
	}
	sec, nsec := n/1e9, n%1e9
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	var mod int64
	if width > 0 {
		if mod = n % width; mod < 0 {
			mod += width
		}
	}
	return strconv.FormatInt(sec, 10) + " " + strconv.FormatInt(nsec, 10) + " " + strconv.FormatInt(mod, 10)
}

// clockMode names where the budget's time comes from, for the
// fingerprint: budgets on different clocks cannot share a key.
func (c *Config) clockMode() string {
	switch {
	case c.ClockKey != "":
		return "key"
	case c.Clock != nil:
		return "caller"
	}
	return "server"
}

func (c *Config) keys(key string) []string {
	if c.ClockKey != "" {
		return []string{key, c.ClockKey}
	}
	return []string{key}
}

// errs counts and reports failed calls.
// counts are a budget's answers to RetryContext in this process.
type counts struct{ granted, denied atomic.Uint64 }

func (c *counts) count(ok bool) bool {
	if ok {
		c.granted.Add(1)
	} else {
		c.denied.Add(1)
	}
	return ok
}

func (c *counts) stats() budget.Stats {
	return budget.Stats{Granted: c.granted.Load(), Denied: c.denied.Load()}
}

type errs struct {
	n       atomic.Uint64
	onError func(error)
	dials   *dialWatch
}

func newErrs(c Config) errs { return errs{onError: c.OnError, dials: watch(c.Client)} }

// fail makes, counts and reports the error of a failed call.
func (e *errs) fail(op, key string, err error) error {
	err = failure(e.dials, op, key, err)
	e.n.Add(1)
	if e.onError != nil {
		e.onError(err)
	}
	return err
}

func milli(x float64) int64 { return int64(math.Round(x * 1000)) }

// maxCapacity keeps every value of the token-bucket script below 2^53:
// capacity × 1e9 in milli-tokens.
const maxCapacity = 9000

// A TokenBucket is budget.TokenBucket kept in Redis and shared by every
// process that uses the same Name. It implements budget.Budget; Request
// makes no call.
//
// TokenBucket is safe for concurrent use by multiple goroutines.
type TokenBucket struct {
	cfg      Config
	key      string
	keys     []string // the script's: key, and ClockKey if set
	capacity int64
	cost     [3]int64
	bonus    int64
	refill   int64
	noRefund bool
	fallback *budget.TokenBucket // nil when the share is under what a bucket can hold
	fleet    bool                // FleetSize is set: a failed call asks the fallback
	fbDeny   [3]bool             // by kind: the kinds whose cost is over the share
	errs     errs
	counts   counts
	// fingerprint names the settings; the key keeps the one that made it,
	// and a call with another fails with ErrConfigMismatch.
	fingerprint string
}

var (
	_ budget.ContextBudget   = (*TokenBucket)(nil)
	_ budget.StatsBudget     = (*TokenBucket)(nil)
	_ budget.ContextBalancer = (*TokenBucket)(nil)
)

// NewTokenBucket returns a TokenBucket named c.Name with the settings of b,
// which must be valid for budget.NewTokenBucket and hold at most 9000
// tokens. b.Clock is ignored: time comes from c.Clock or the server.
func NewTokenBucket(c Config, b budget.TokenBucketConfig) (*TokenBucket, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if _, err := budget.NewTokenBucket(b); err != nil {
		return nil, err
	}
	if b.Capacity > maxCapacity {
		return nil, &budget.ConfigError{Field: "TokenBucketConfig.Capacity", Value: fmt.Sprint(b.Capacity), Want: fmt.Sprintf("at most %d in redisbudget", maxCapacity)}
	}
	t := &TokenBucket{
		cfg: c, key: "retrybudget:{" + c.Name + "}:tb", keys: c.keys("retrybudget:{" + c.Name + "}:tb"),
		capacity: milli(b.Capacity), bonus: milli(b.SuccessBonus), refill: milli(b.RefillPerSecond), noRefund: b.NoRefund,
		cost: [3]int64{0, milli(b.TransientCost), milli(b.ThrottledCost)},
		errs: newErrs(c),
	}
	t.fingerprint = fmt.Sprintf("tokenbucket capacity=%g transient=%g throttled=%g bonus=%g refill=%g/s refund=%t clock=%s",
		b.Capacity, b.TransientCost, b.ThrottledCost, b.SuccessBonus, b.RefillPerSecond, !b.NoRefund, c.clockMode())
	if c.FleetSize > 0 {
		// A process's share: 1/FleetSize of the capacity and of the
		// refill. A kind whose cost is over the share is never granted by
		// the fallback (the bucket holds its cost at the share only so
		// that the configuration is valid); under the smallest capacity a
		// bucket takes, the fallback denies everything.
		share := b.Capacity / float64(c.FleetSize)
		if share >= minFallbackCapacity {
			local := b
			local.Capacity = share
			local.RefillPerSecond = b.RefillPerSecond / float64(c.FleetSize)
			local.TransientCost = min(b.TransientCost, share)
			local.ThrottledCost = min(b.ThrottledCost, share)
			local.SuccessBonus = min(b.SuccessBonus, share)
			local.Clock = nil
			fb, err := budget.NewTokenBucket(local)
			if err != nil {
				return nil, err
			}
			t.fallback = fb
		}
		t.fbDeny = [3]bool{true, b.TransientCost > share, b.ThrottledCost > share}
		t.fleet = true
	}
	return t, nil
}

// minFallbackCapacity is the smallest capacity budget.NewTokenBucket takes.
const minFallbackCapacity = 0.001

// fallbackRetry is the fallback's answer for a retry of kind k.
func (t *TokenBucket) fallbackRetry(k budget.Kind) bool {
	if t.fallback == nil || t.fbDeny[k] {
		return false
	}
	return t.fallback.Retry(k)
}

// Errors returns how many calls to Redis have failed.
func (t *TokenBucket) Errors() uint64 { return t.errs.n.Load() }

// Request makes no call: a first attempt is free.
func (t *TokenBucket) Request() {}

// RequestContext makes no call and returns nil.
func (t *TokenBucket) RequestContext(context.Context) error { return nil }

// Retry is RetryContext with a background context.
func (t *TokenBucket) Retry(k budget.Kind) bool {
	ok, _ := t.RetryContext(context.Background(), k)
	return ok
}

// RetryContext asks Redis for a retry of kind k within CallTimeout and
// ctx. If the call fails, the retry is denied (or decided by the fallback)
// and the error, wrapping ErrUnavailable, is returned and reported.
func (t *TokenBucket) RetryContext(ctx context.Context, k budget.Kind) (bool, error) {
	ok, err := t.retry(ctx, k)
	return t.counts.count(ok), err
}

func (t *TokenBucket) retry(ctx context.Context, k budget.Kind) (bool, error) {
	if !k.IsRetry() {
		return false, nil
	}
	res, err := t.run(ctx, "retry", t.cost[k])
	if err != nil {
		if t.fleet {
			return t.fallbackRetry(k), err
		}
		return false, err
	}
	return res == 1, nil
}

// Stats returns the retries this process's TokenBucket granted and denied,
// the fallback's answers included; other processes keep their own.
func (t *TokenBucket) Stats() budget.Stats { return t.counts.stats() }

// AvailableContext reads the shared balance in tokens, with the refill due
// by now, within CallTimeout and ctx; it changes nothing in Redis. A key
// that does not exist yet reads as a full bucket. Use it for metrics,
// never to decide a retry.
func (t *TokenBucket) AvailableContext(ctx context.Context) (float64, error) {
	m, err := t.run(ctx, "peek", 0)
	if err != nil {
		return 0, err
	}
	return float64(m) / 1000, nil
}

// Success is SuccessContext with a background context.
func (t *TokenBucket) Success(k budget.Kind) { _ = t.SuccessContext(context.Background(), k) }

// SuccessContext credits a successful attempt: the refund of a retry of
// kind k, or the bonus of a first attempt.
func (t *TokenBucket) SuccessContext(ctx context.Context, k budget.Kind) error {
	credit := t.bonus
	if k.IsRetry() && !t.noRefund {
		credit = t.cost[k]
	}
	if t.fallback != nil {
		t.fallback.Success(k)
	}
	if credit == 0 && t.refill == 0 {
		return nil
	}
	_, err := t.run(ctx, "credit", credit)
	return err
}

func (t *TokenBucket) run(ctx context.Context, op string, amount int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.CallTimeout)
	defer cancel()
	granted, err := tokenBucketScript.Run(ctx, t.cfg.Client, t.keys, op, amount, t.capacity, t.refill, t.cfg.now(0), t.cfg.IdleTTL.Milliseconds(), t.fingerprint).Int64()
	if err != nil {
		return 0, t.errs.fail(op, t.key, err)
	}
	return granted, nil
}

// A Ratio is budget.Ratio kept in Redis and shared by every process that
// uses the same Name. It implements budget.Budget; Success makes no call.
//
// Ratio is safe for concurrent use by multiple goroutines.
type Ratio struct {
	cfg      Config
	key      string
	keys     []string // the script's: key, and ClockKey if set
	width    int64
	slots    int64
	ppm      int64
	floor    int64
	reserve  int64
	fallback *budget.Ratio
	errs     errs
	counts   counts
	// fingerprint: as TokenBucket's.
	fingerprint string
}

var (
	_ budget.ContextBudget   = (*Ratio)(nil)
	_ budget.StatsBudget     = (*Ratio)(nil)
	_ budget.ContextBalancer = (*Ratio)(nil)
)

// NewRatio returns a Ratio named c.Name with the settings of r, which must
// be valid for budget.NewRatio and have at most 1024 slots. r.Clock is
// ignored: time comes from c.Clock or the server. Every process that
// shares the Name must have the same settings, Floor and Reserve included
// (ErrConfigMismatch).
func NewRatio(c Config, r budget.RatioConfig) (*Ratio, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	r.Clock = new(budget.ManualClock)
	if _, err := budget.NewRatio(r); err != nil {
		return nil, err
	}
	if r.Slots > 1024 {
		return nil, &budget.ConfigError{Field: "RatioConfig.Slots", Value: fmt.Sprint(r.Slots), Want: "at most 1024 in redisbudget"}
	}
	b := &Ratio{
		cfg: c, key: "retrybudget:{" + c.Name + "}:ratio", keys: c.keys("retrybudget:{" + c.Name + "}:ratio"),
		width: int64(r.Window) / int64(r.Slots), slots: int64(r.Slots),
		ppm: int64(math.Round(r.Ratio * 1e6)), floor: int64(r.Floor), reserve: int64(r.Reserve),
		errs: newErrs(c),
	}
	b.fingerprint = fmt.Sprintf("ratio window=%v slots=%d ratio=%g floor=%d reserve=%d clock=%s", r.Window, r.Slots, r.Ratio, r.Floor, r.Reserve, c.clockMode())
	if c.FleetSize > 0 {
		// A process's share: 1/FleetSize of the floor and of the reserve,
		// rounded down. The ratio stays: the fallback counts only this
		// process's requests, and allows the same share of them.
		local := r
		local.Floor = r.Floor / c.FleetSize
		local.Reserve = r.Reserve / c.FleetSize
		local.Clock = nil
		fb, err := budget.NewRatio(local)
		if err != nil {
			return nil, err
		}
		b.fallback = fb
	}
	return b, nil
}

// Errors returns how many calls to Redis have failed.
func (r *Ratio) Errors() uint64 { return r.errs.n.Load() }

// Request is RequestContext with a background context.
func (r *Ratio) Request() { _ = r.RequestContext(context.Background()) }

// RequestContext counts a request in the current slot.
func (r *Ratio) RequestContext(ctx context.Context) error {
	if r.fallback != nil {
		r.fallback.Request()
	}
	_, err := r.run(ctx, "request")
	return err
}

// Retry is RetryContext with a background context.
func (r *Ratio) Retry(k budget.Kind) bool {
	ok, _ := r.RetryContext(context.Background(), k)
	return ok
}

// RetryContext asks Redis whether one more retry keeps the window within
// max(Floor, ⌊Ratio × requests⌋ + Reserve). If the call fails, the retry is
// denied (or decided by the fallback) and the error is returned and
// reported.
func (r *Ratio) RetryContext(ctx context.Context, k budget.Kind) (bool, error) {
	ok, err := r.retry(ctx, k)
	return r.counts.count(ok), err
}

// Stats returns the retries this process's Ratio granted and denied, the
// fallback's answers included; other processes keep their own.
func (r *Ratio) Stats() budget.Stats { return r.counts.stats() }

// AvailableContext reads how many more retries the shared window would
// grant now, max(Floor, ⌊Ratio × requests⌋ + Reserve) minus the retries in
// it, within CallTimeout and ctx; it changes nothing in Redis. Use it for
// metrics, never to decide a retry.
func (r *Ratio) AvailableContext(ctx context.Context) (float64, error) {
	n, err := r.run(ctx, "peek")
	if err != nil {
		return 0, err
	}
	return float64(n), nil
}

func (r *Ratio) retry(ctx context.Context, k budget.Kind) (bool, error) {
	if !k.IsRetry() {
		return false, nil
	}
	res, err := r.run(ctx, "retry")
	if err != nil {
		if r.fallback != nil {
			return r.fallback.Retry(k), err
		}
		return false, err
	}
	return res == 1, nil
}

// Success makes no call: a Ratio recovers as its window slides.
func (r *Ratio) Success(budget.Kind) {}

// SuccessContext makes no call and returns nil.
func (r *Ratio) SuccessContext(context.Context, budget.Kind) error { return nil }

func (r *Ratio) run(ctx context.Context, op string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	v, err := ratioScript.Run(ctx, r.cfg.Client, r.keys, op, r.width, r.slots, r.ppm, r.floor, r.reserve, r.cfg.now(r.width), r.cfg.IdleTTL.Milliseconds(), r.fingerprint).Int64()
	if err != nil {
		return 0, r.errs.fail(op, r.key, err)
	}
	return v, nil
}
