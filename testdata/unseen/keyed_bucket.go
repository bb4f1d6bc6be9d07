package unseen

import (
	"github.com/retrybudget/retrybudget/budget"
)

// KeyedBucket is a correct per-destination budget built on budget.Keyed:
// one budget.TokenBucket per host, built on first use. A KeyedBucket is the
// budget one caller hands its retry loop for one host; every call goes
// through Keyed.Get of that host, as a router that looks the destination up
// per request would, so the key's bucket is reached only through Keyed
// while other hosts are held beside it.
type KeyedBucket struct {
	perHost *budget.Keyed[string, *budget.TokenBucket]
	host    string
}

// NewKeyedBucket returns the budget of host in perHost.
func NewKeyedBucket(perHost *budget.Keyed[string, *budget.TokenBucket], host string) *KeyedBucket {
	return &KeyedBucket{perHost: perHost, host: host}
}

// bucket returns the host's bucket. Keyed only fails when its New fails,
// which a valid configuration never does.
func (b *KeyedBucket) bucket() *budget.TokenBucket {
	tb, err := b.perHost.Get(b.host)
	if err != nil {
		panic("unseen: KeyedBucket: " + err.Error())
	}
	return tb
}

// Request tells the host's bucket a first attempt starts.
func (b *KeyedBucket) Request() { b.bucket().Request() }

// Retry asks the host's bucket for a retry.
func (b *KeyedBucket) Retry(k budget.Kind) bool { return b.bucket().Retry(k) }

// Success tells the host's bucket an attempt succeeded.
func (b *KeyedBucket) Success(k budget.Kind) { b.bucket().Success(k) }

// Available returns the host's balance.
func (b *KeyedBucket) Available() float64 { return b.bucket().Available() }
