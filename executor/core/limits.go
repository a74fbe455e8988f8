package core

import "time"

// Limit is an agent's word that it is out of quota.
type Limit struct {
	// Reset is when the CLI said the limit ends; zero when it named no time.
	Reset time.Time
	Text  string // the CLI's words
}

// Limit backoff when no agent named its reset: 1 minute, doubling,
// at most 30 minutes a wait.
const (
	LimitBackoffMin = time.Minute
	LimitBackoffMax = 30 * time.Minute
)

// limitBackoff is the wait after the n-th limited answer in a row (n ≥ 1).
func limitBackoff(n int) time.Duration {
	return min(LimitBackoffMin<<min(max(n-1, 0), 10), LimitBackoffMax)
}
