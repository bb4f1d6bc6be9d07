// Package zoo holds correct retry budgets written the way other teams write
// them, each its own design (a read-write mutex, a compare-and-swap loop, a
// refill under a mutex, a ring of slots, a goroutine that owns the state
// and stops in Close, an immutable snapshot behind an atomic pointer,
// atomic fields changed under a mutex and read lock-free through a seqlock,
// a float64 balance snapped to the model's resolution; and, for the budgets
// that count work in flight, two counts under a mutex, two counts packed in
// one word changed by compare-and-swap, a goroutine that owns the counts and
// is sent each operation on a channel of its own, and failsafe-go's rule on
// an immutable snapshot behind an atomic pointer), and written from
// the budget contract and the models' text alone, without reading the
// checks. Their tests put each through budgettest.Run: a gate that failed
// any of them would be crying wolf.
package zoo
