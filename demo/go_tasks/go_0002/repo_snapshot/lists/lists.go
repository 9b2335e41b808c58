// Package lists holds small helpers for slices of numbers.
package lists

// Chunk splits xs into consecutive slices of n elements, in order; the last one
// holds whatever is left over. It returns nil when n is not positive.
func Chunk(xs []int, n int) [][]int {
	if n <= 0 {
		return nil
	}
	var out [][]int
	for i := 0; i < len(xs); i += n {
		end := i + n
		if end > len(xs) {
			end = len(xs)
		}
		out = append(out, xs[i:end])
	}
	return out
}

// Mean is the arithmetic mean of xs, and 0 for an empty slice.
func Mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// MovingAverage is the mean of every window of k consecutive values of xs, in
// order: len(xs)-k+1 values, and none when k is not positive or longer than xs.
func MovingAverage(xs []float64, k int) []float64 {
	if k <= 0 || k > len(xs) {
		return nil
	}
	out := make([]float64, 0, len(xs)-k+1)
	for i := 0; i+k <= len(xs); i++ {
		out = append(out, Mean(xs[i:i+k]))
	}
	return out
}
