package main

import (
	"fmt"
	"sort"
	"time"
)

// runTimeout bounds one run of n fleets.
func runTimeout(n int) time.Duration { return 5*time.Minute + time.Duration(n)*2*time.Second }

// --- helpers -------------------------------------------------------------------------------------

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minMax(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// percentile of raw samples, nearest rank.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func pick[T any](xs []T, f func(T) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

func bytesStr(v float64) string {
	switch a := v; {
	case a >= 1<<30 || a <= -(1<<30):
		return fmt.Sprintf("%.2f GiB", v/(1<<30))
	case a >= 1<<20 || a <= -(1<<20):
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case a >= 1<<10 || a <= -(1<<10):
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}
