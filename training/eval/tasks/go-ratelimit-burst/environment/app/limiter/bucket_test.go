package limiter

import (
	"testing"
	"time"
)

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Sleep(d time.Duration)   { c.now = c.now.Add(d) }
func (c *fakeClock) advance(d time.Duration) { c.now = c.now.Add(d) }

func TestStartsFull(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1700000000, 0)}
	b := NewWithClock(1, 3, clock)
	for i := 0; i < 3; i++ {
		if !b.Allow() {
			t.Fatalf("request %d refused", i+1)
		}
	}
	if b.Allow() {
		t.Fatal("a fourth request went through")
	}
}

func TestRefillsOverTime(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1700000000, 0)}
	b := NewWithClock(2, 2, clock)
	b.AllowN(2)
	clock.advance(time.Second)
	if !b.AllowN(2) {
		t.Fatal("two tokens should be back after a second at rate 2")
	}
}

func TestExceedsBurst(t *testing.T) {
	b := NewWithClock(1, 2, &fakeClock{})
	if _, err := b.Reserve(3); err != ErrExceedsBurst {
		t.Fatalf("Reserve(3) = %v", err)
	}
}

func TestKeyedPrune(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1700000000, 0)}
	k := NewKeyed(1, 1, clock)
	k.Allow("a")
	clock.advance(time.Minute)
	k.Allow("b")
	if n := k.Prune(30 * time.Second); n != 1 || k.Len() != 1 {
		t.Fatalf("pruned %d, %d left", n, k.Len())
	}
}
