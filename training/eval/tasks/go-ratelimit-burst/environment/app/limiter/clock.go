package limiter

import "time"

// Clock is the time source of a Bucket. Tests use a fake one; production uses SystemClock.
type Clock interface {
	Now() time.Time
	Sleep(d time.Duration)
}

// SystemClock is the wall clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time        { return time.Now() }
func (SystemClock) Sleep(d time.Duration) { time.Sleep(d) }
