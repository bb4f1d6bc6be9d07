// Package awsbudget makes any retry budget the retry quota of the AWS SDK
// for Go v2, so that the SDK's own retry loop spends it.
//
// The SDK's standard retryer (aws/retry.Standard) asks a retry.RateLimiter
// for a token before every retry and gives tokens back on success. By
// default each client has its own bucket of 500 tokens, so a fleet of N
// processes retries N times as much as one, and it retries most exactly
// when a dependency fails and the fleet scales out. A [RateLimiter] backed
// by a budget shared by the fleet (a redisbudget.TokenBucket, say) bounds
// the retries of every client together.
//
// The SDK's calls map onto the budget contract as follows:
//
//   - GetToken(ThrottlingRetryCost), 5 by default, asks for a Throttled
//     retry; any other cost (RetryCost, 14 by default) for a Transient one.
//   - The release function GetToken returns runs when the retry succeeds:
//     Success of the retry's kind.
//   - AddTokens(NoRetryIncrement) runs when a first attempt succeeds:
//     Success(FirstAttempt).
//
// The SDK never says when a call starts, so a budget that counts requests
// (budget.Ratio) also needs [CountRequests] in the client's APIOptions.
// It never says when a failed attempt or a call ends either, so a
// budget.InFlightBudget cannot be served and is refused. Nor does it ask
// for a token after its last attempt, so a budget.FailureCounter (a
// budget.Throttle) is not told of that attempt's failure, as the SDK's own
// quota is charged nothing for it. A retry asked for on a context that has
// ended, which the SDK does after an attempt cancelled while it ran, is
// refused without asking the budget, as the SDK's quota refuses it.
//
// One shared budget for every client of a process or a fleet:
//
//	quota := awsbudget.New(fleetBudget)
//	cfg.Retryer = func() aws.Retryer {
//		return retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = quota })
//	}
//
// The budget's costs are its own: give a budget.TokenBucket the SDK's
// numbers (Capacity 500, TransientCost 14, ThrottledCost 5, SuccessBonus 1)
// to keep the SDK's arithmetic, now for the whole fleet.
package awsbudget
