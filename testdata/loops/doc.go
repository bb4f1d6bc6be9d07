// Package loops puts third-party retry loops through the loop checks of
// package stress: cenkalti/backoff/v5, sethvargo/go-retry,
// avast/retry-go/v4, hashicorp/go-retryablehttp and failsafe-go's retry
// policy (failsafe-go/failsafe-go/retrypolicy). It is a module of its
// own, so that none of them is ever a requirement of the retrybudget
// module; its tests pin what the checks say about each loop, and why, from
// the library's own source.
package loops
