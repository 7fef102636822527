package hnsmodel

import (
	"math"
	"time"
)

// Histogram counts latencies in buckets growing by 10% from 1 ms (a
// percentile is read as its bucket's upper bound, at most 10% high), with the
// exact count, sum and maximum. Fixed size whatever the number of samples:
// 300 nodes × tens of thousands of changes stay a few KB per node.
type Histogram struct {
	Buckets [histogramBuckets]int64
	Count   int64
	Sum     time.Duration
	Max     time.Duration
}

const (
	histogramBuckets = 180 // up to 1 ms × 1.1^179 ≈ 7 hours; longer lands in the last
	histogramGrowth  = 1.1
)

// BucketBound is the upper bound of bucket i.
func BucketBound(i int) time.Duration {
	return time.Duration(float64(time.Millisecond) * math.Pow(histogramGrowth, float64(i)))
}

func (h *Histogram) Observe(d time.Duration) {
	i := 0
	if d > time.Millisecond {
		i = int(math.Ceil(math.Log(float64(d)/float64(time.Millisecond)) / math.Log(histogramGrowth)))
		// Rounding can put d just above its bucket's bound.
		for i < histogramBuckets-1 && BucketBound(i) < d {
			i++
		}
		i = min(i, histogramBuckets-1)
	}
	h.Buckets[i]++
	h.Count++
	h.Sum += d
	h.Max = max(h.Max, d)
}

// Quantile is the upper bound of the bucket holding the q-th sample, never
// above the maximum (0 without samples).
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.Count)))
	rank = max(rank, 1)
	var seen int64
	for i, n := range h.Buckets {
		seen += n
		if seen >= rank {
			return min(BucketBound(i), h.Max)
		}
	}
	return h.Max
}

// Summary is a histogram as the fleet writes it.
type Summary struct {
	Changes int64   `json:"changes"`
	MeanMs  float64 `json:"meanMs"`
	P50Ms   float64 `json:"p50Ms"`
	P99Ms   float64 `json:"p99Ms"`
	MaxMs   float64 `json:"maxMs"`
}

func (h *Histogram) Summary() Summary {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	s := Summary{Changes: h.Count, P50Ms: ms(h.Quantile(0.5)), P99Ms: ms(h.Quantile(0.99)), MaxMs: ms(h.Max)}
	if h.Count > 0 {
		s.MeanMs = ms(h.Sum) / float64(h.Count)
	}
	return s
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, n := range o.Buckets {
		h.Buckets[i] += n
	}
	h.Count += o.Count
	h.Sum += o.Sum
	h.Max = max(h.Max, o.Max)
}
