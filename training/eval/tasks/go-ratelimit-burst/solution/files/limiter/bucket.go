// Package limiter is the gateway's request rate limiter: a token bucket per client.
//
// A bucket holds at most `burst` tokens and gains `rate` tokens a second, continuously.
// Each request takes one token (or n); a request that finds too few tokens is refused
// (Allow) or waits for them (Wait).
package limiter

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// ErrExceedsBurst is returned for a request of more tokens than the bucket can ever hold.
var ErrExceedsBurst = errors.New("limiter: request exceeds burst")

// Bucket is a token bucket. It is safe for concurrent use.
type Bucket struct {
	mu     sync.Mutex
	clock  Clock
	rate   float64 // tokens per second
	burst  int
	tokens float64
	last   time.Time // when tokens was last brought up to date
}

// New returns a full bucket that refills at rate tokens per second up to burst tokens.
func New(rate float64, burst int) *Bucket {
	return NewWithClock(rate, burst, SystemClock{})
}

// NewWithClock is New with another time source.
func NewWithClock(rate float64, burst int, clock Clock) *Bucket {
	if rate <= 0 || burst < 1 {
		panic(fmt.Sprintf("limiter: invalid rate %v or burst %d", rate, burst))
	}
	return &Bucket{clock: clock, rate: rate, burst: burst, tokens: float64(burst), last: clock.Now()}
}

// refill brings the tokens up to date; the caller holds mu. The time since the last refill
// counts whole (fractions of a second too), and the bucket never holds more than burst. A
// clock that went backwards adds nothing and leaves last where it was.
func (b *Bucket) refill(now time.Time) {
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens += elapsed.Seconds() * b.rate
		b.last = now
	}
	if b.tokens > float64(b.burst) {
		b.tokens = float64(b.burst)
	}
}

// Allow reports whether one request may go now, and takes its token if so.
func (b *Bucket) Allow() bool { return b.AllowN(1) }

// AllowN reports whether n tokens are there now, and takes them if so.
func (b *Bucket) AllowN(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(b.clock.Now())
	if float64(n) > b.tokens {
		return false
	}
	b.tokens -= float64(n)
	return true
}

// Reserve takes n tokens now, going into debt if there are too few, and returns how long the
// caller must wait before acting on them (0 if they were all there).
func (b *Bucket) Reserve(n int) (time.Duration, error) {
	if n > b.burst {
		return 0, ErrExceedsBurst
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(b.clock.Now())
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return 0, nil
	}
	return time.Duration(math.Ceil(-b.tokens / b.rate * float64(time.Second))), nil
}

// Wait blocks until n tokens are available and takes them.
func (b *Bucket) Wait(n int) error {
	delay, err := b.Reserve(n)
	if err != nil {
		return err
	}
	if delay > 0 {
		b.clock.Sleep(delay)
	}
	return nil
}

// Tokens is how many tokens the bucket holds now (negative while reservations are in debt).
func (b *Bucket) Tokens() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(b.clock.Now())
	return b.tokens
}

// SetRate changes the refill rate from now on: the time until now is credited at the old rate.
func (b *Bucket) SetRate(rate float64) {
	if rate <= 0 {
		panic(fmt.Sprintf("limiter: invalid rate %v", rate))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(b.clock.Now())
	b.rate = rate
}

// Rate and Burst are the bucket's settings.
func (b *Bucket) Rate() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rate
}

func (b *Bucket) Burst() int { return b.burst }
