package limiter

import (
	"sync"
	"time"
)

// Keyed is one bucket per key (client id, API token), created on first use.
type Keyed struct {
	mu      sync.Mutex
	rate    float64
	burst   int
	clock   Clock
	buckets map[string]*entry
}

type entry struct {
	bucket *Bucket
	seen   time.Time
}

// NewKeyed returns a Keyed whose buckets all have the given rate and burst.
func NewKeyed(rate float64, burst int, clock Clock) *Keyed {
	if clock == nil {
		clock = SystemClock{}
	}
	return &Keyed{rate: rate, burst: burst, clock: clock, buckets: map[string]*entry{}}
}

// Get returns the key's bucket, creating a full one if the key is new.
func (k *Keyed) Get(key string) *Bucket {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.buckets[key]
	if !ok {
		e = &entry{bucket: NewWithClock(k.rate, k.burst, k.clock)}
		k.buckets[key] = e
	}
	e.seen = k.clock.Now()
	return e.bucket
}

// Allow is Get(key).Allow().
func (k *Keyed) Allow(key string) bool { return k.Get(key).Allow() }

// Prune forgets the buckets not used for at least idle (a forgotten key starts full again,
// so idle should be at least burst/rate). It returns how many it removed.
func (k *Keyed) Prune(idle time.Duration) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.clock.Now()
	removed := 0
	for key, e := range k.buckets {
		if now.Sub(e.seen) >= idle {
			delete(k.buckets, key)
			removed++
		}
	}
	return removed
}

// Len is the number of keys tracked.
func (k *Keyed) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.buckets)
}
