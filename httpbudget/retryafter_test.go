package httpbudget

import (
	"math"
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"1", time.Second},
		{"120", 2 * time.Minute},
		{"007", 7 * time.Second},
		{"9223372036", 9223372036 * time.Second},   // the most whole seconds a Duration holds
		{"9223372037", math.MaxInt64},              // one more
		{"99999999999999999999999", math.MaxInt64}, // past uint64
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second}, // IMF-fixdate
		{"Sunday, 01-Mar-26 12:00:30 GMT", 30 * time.Second},                  // RFC 850, obsolete
		{"Sun Mar  1 12:00:45 2026", 45 * time.Second},                        // asctime, obsolete
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},                      // in the past
		{now.Format(http.TimeFormat), 0},                                      // now
		{"-1", 0},
		{"+5", 0},
		{"1.5", 0},
		{"5s", 0},
		{"1e3", 0},
		{" 5", 0}, // net/http trims header values; anything else is not delay-seconds
		{"soon", 0},
		{"Sun, 01 Mar 2026 12:00:30", 0}, // no zone
	} {
		if got := retryAfter(tt.v, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tt.v, got, tt.want)
		}
	}
}
