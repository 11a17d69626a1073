package limiter_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"example.com/gateway/limiter"
)

// verifyClock is a fake clock: it moves only when told to (or when a Wait sleeps on it).
type verifyClock struct {
	mu    sync.Mutex
	now   time.Time
	slept time.Duration
}

func newVerifyClock() *verifyClock { return &verifyClock{now: time.Unix(1700000000, 0)} }

func (c *verifyClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *verifyClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.slept += d
}

func (c *verifyClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func allowedInARow(b *limiter.Bucket) int {
	n := 0
	for n < 100000 && b.Allow() {
		n++
	}
	return n
}

func near(got, want, tolerance float64) bool { return math.Abs(got-want) <= tolerance }

func TestIdleNeverRefillsPastBurst(t *testing.T) {
	for _, idle := range []time.Duration{10 * time.Second, time.Hour, 72 * time.Hour} {
		clock := newVerifyClock()
		b := limiter.NewWithClock(1, 5, clock)
		if got := allowedInARow(b); got != 5 {
			t.Fatalf("a fresh bucket allowed %d in a row, want 5", got)
		}
		clock.advance(idle)
		if b.AllowN(6) {
			t.Errorf("after %v idle: AllowN(6) went through with a burst of 5", idle)
		}
		if got := allowedInARow(b); got != 5 {
			t.Errorf("after %v idle: %d requests in a row went through, want the burst (5)", idle, got)
		}
		if tokens := b.Tokens(); !near(tokens, 0, 1e-9) {
			t.Errorf("after the burst: %v tokens left, want 0", tokens)
		}
	}
}

func TestIdleAfterDebtStillCapsAtBurst(t *testing.T) {
	clock := newVerifyClock()
	b := limiter.NewWithClock(2, 4, clock)
	for i := 0; i < 3; i++ {
		if _, err := b.Reserve(4); err != nil {
			t.Fatal(err)
		}
	}
	clock.advance(time.Hour)
	if tokens := b.Tokens(); !near(tokens, 4, 1e-9) {
		t.Fatalf("after an hour idle: %v tokens, want 4", tokens)
	}
	if got := allowedInARow(b); got != 4 {
		t.Fatalf("%d in a row after an hour idle, want 4", got)
	}
}

func TestTokensReadingDoesNotOverfill(t *testing.T) {
	clock := newVerifyClock()
	b := limiter.NewWithClock(3, 6, clock)
	for i := 0; i < 50; i++ {
		clock.advance(time.Second)
		if tokens := b.Tokens(); tokens > 6+1e-9 {
			t.Fatalf("Tokens() = %v, above the burst of 6", tokens)
		}
	}
	if got := allowedInARow(b); got != 6 {
		t.Fatalf("%d in a row, want 6", got)
	}
}

func TestSteadyClientUnderTheRateIsNeverRefused(t *testing.T) {
	// 4 requests a second against a rate of 5: every one must go through.
	clock := newVerifyClock()
	b := limiter.NewWithClock(5, 2, clock)
	for i := 0; i < 400; i++ {
		if !b.Allow() {
			t.Fatalf("request %d (one every 250ms, rate 5/s) was refused", i+1)
		}
		clock.advance(250 * time.Millisecond)
	}
}

func TestSteadyClientOverTheRateGetsTheRate(t *testing.T) {
	// 20 requests a second for 10 s against a rate of 10 and a burst of 5.
	clock := newVerifyClock()
	b := limiter.NewWithClock(10, 5, clock)
	allowed := 0
	for i := 0; i < 200; i++ {
		if b.Allow() {
			allowed++
		}
		clock.advance(50 * time.Millisecond)
	}
	if allowed < 103 || allowed > 106 {
		t.Fatalf("%d of 200 allowed over 10 s at rate 10 burst 5, want about 105", allowed)
	}
}

func TestFractionsOfASecondRefill(t *testing.T) {
	clock := newVerifyClock()
	b := limiter.NewWithClock(10, 1, clock)
	if !b.Allow() {
		t.Fatal("first request refused")
	}
	clock.advance(50 * time.Millisecond)
	if b.Allow() {
		t.Fatal("allowed after 50ms at rate 10 (half a token)")
	}
	clock.advance(60 * time.Millisecond)
	if !b.Allow() {
		t.Fatal("refused after 110ms at rate 10 (more than a token)")
	}
	for i := 0; i < 3; i++ {
		clock.advance(25 * time.Millisecond)
		if b.Allow() {
			t.Fatalf("allowed %dms after the last one at rate 10", 25*(i+1))
		}
	}
	if tokens := b.Tokens(); !near(tokens, 0.75, 1e-9) {
		t.Fatalf("Tokens() = %v 75ms after the last one, want 0.75", tokens)
	}
	clock.advance(30 * time.Millisecond)
	if !b.Allow() {
		t.Fatal("refused 105ms after the last one")
	}
}

func TestSlowRatesRefill(t *testing.T) {
	// Half a token a second: one request every two seconds.
	clock := newVerifyClock()
	b := limiter.NewWithClock(0.5, 1, clock)
	b.Allow()
	clock.advance(1500 * time.Millisecond)
	if b.Allow() {
		t.Fatal("allowed after 1.5 s at rate 0.5")
	}
	clock.advance(600 * time.Millisecond)
	if !b.Allow() {
		t.Fatal("refused after 2.1 s at rate 0.5")
	}
}

func TestReserveReturnsTheExactDelay(t *testing.T) {
	clock := newVerifyClock()
	b := limiter.NewWithClock(4, 2, clock)
	cases := []struct {
		n    int
		want time.Duration
	}{{2, 0}, {1, 250 * time.Millisecond}, {2, 750 * time.Millisecond}, {1, time.Second}}
	for _, c := range cases {
		got, err := b.Reserve(c.n)
		if err != nil {
			t.Fatal(err)
		}
		if diff := got - c.want; diff < -time.Millisecond || diff > time.Millisecond {
			t.Fatalf("Reserve(%d) = %v, want %v", c.n, got, c.want)
		}
	}
	if tokens := b.Tokens(); !near(tokens, -4, 1e-9) {
		t.Fatalf("Tokens() = %v in debt, want -4", tokens)
	}
	clock.advance(time.Second)
	if tokens := b.Tokens(); !near(tokens, 0, 1e-9) {
		t.Fatalf("Tokens() = %v after paying the debt, want 0", tokens)
	}
}

func TestReserveOfSlowRate(t *testing.T) {
	clock := newVerifyClock()
	b := limiter.NewWithClock(0.25, 1, clock)
	b.Allow()
	got, err := b.Reserve(1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := got - 4*time.Second; diff < -time.Millisecond || diff > time.Millisecond {
		t.Fatalf("Reserve(1) at rate 0.25 right after the burst = %v, want 4s", got)
	}
}

func TestWaitSleepsJustLongEnough(t *testing.T) {
	clock := newVerifyClock()
	b := limiter.NewWithClock(10, 1, clock)
	for i := 0; i < 50; i++ {
		if err := b.Wait(1); err != nil {
			t.Fatal(err)
		}
	}
	// The first is free, the other 49 a tenth of a second apart.
	if diff := clock.slept - 4900*time.Millisecond; diff < -5*time.Millisecond || diff > 5*time.Millisecond {
		t.Fatalf("50 Waits at rate 10 slept %v in all, want 4.9s", clock.slept)
	}
	if err := b.Wait(2); err != limiter.ErrExceedsBurst {
		t.Fatalf("Wait(2) with burst 1 = %v, want ErrExceedsBurst", err)
	}
}

func TestSetRateKeepsWhatWasEarned(t *testing.T) {
	clock := newVerifyClock()
	b := limiter.NewWithClock(1, 10, clock)
	b.AllowN(10)
	clock.advance(4 * time.Second)
	b.SetRate(100)
	if tokens := b.Tokens(); !near(tokens, 4, 1e-9) {
		t.Fatalf("right after SetRate(100): %v tokens, want the 4 earned at rate 1", tokens)
	}
	clock.advance(30 * time.Millisecond)
	if tokens := b.Tokens(); !near(tokens, 7, 1e-9) {
		t.Fatalf("30ms later at rate 100: %v tokens, want 7", tokens)
	}
	if b.Rate() != 100 {
		t.Fatalf("Rate() = %v", b.Rate())
	}
}

func TestSetRateDownKeepsWhatWasEarned(t *testing.T) {
	clock := newVerifyClock()
	b := limiter.NewWithClock(10, 10, clock)
	b.AllowN(10)
	clock.advance(500 * time.Millisecond)
	b.SetRate(1)
	if tokens := b.Tokens(); !near(tokens, 5, 1e-9) {
		t.Fatalf("right after SetRate(1): %v tokens, want the 5 earned at rate 10", tokens)
	}
	clock.advance(2 * time.Second)
	if got := allowedInARow(b); got != 7 {
		t.Fatalf("%d in a row, want 7", got)
	}
}

func TestConcurrentRequestsGetTheBurstOnly(t *testing.T) {
	clock := newVerifyClock()
	b := limiter.NewWithClock(1, 25, clock)
	clock.advance(time.Hour)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if b.Allow() {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if allowed != 25 {
		t.Fatalf("%d of 1000 concurrent requests allowed, want the burst (25)", allowed)
	}
}

func TestKeyedBucketsAreIndependentAndCapped(t *testing.T) {
	clock := newVerifyClock()
	k := limiter.NewKeyed(2, 3, clock)
	for i := 0; i < 3; i++ {
		if !k.Allow("alice") {
			t.Fatal("alice refused within her burst")
		}
	}
	if k.Allow("alice") || !k.Allow("bob") {
		t.Fatal("alice's bucket and bob's are not independent")
	}
	clock.advance(24 * time.Hour)
	n := 0
	for k.Allow("alice") {
		n++
	}
	if n != 3 {
		t.Fatalf("alice got %d in a row after a day idle, want 3", n)
	}
}

func TestInvalidSettingsPanic(t *testing.T) {
	for _, c := range []struct {
		rate  float64
		burst int
	}{{0, 1}, {-1, 1}, {1, 0}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewWithClock(%v, %d) did not panic", c.rate, c.burst)
				}
			}()
			limiter.NewWithClock(c.rate, c.burst, newVerifyClock())
		}()
	}
}
