package lists

import (
	"reflect"
	"testing"
)

func TestChunkSplitsEvenly(t *testing.T) {
	got := Chunk([]int{1, 2, 3, 4}, 2)
	if want := [][]int{{1, 2}, {3, 4}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Chunk([1 2 3 4], 2) = %v, want %v", got, want)
	}
}

func TestChunkKeepsTheRemainder(t *testing.T) {
	got := Chunk([]int{1, 2, 3, 4, 5}, 2)
	if want := [][]int{{1, 2}, {3, 4}, {5}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Chunk([1 2 3 4 5], 2) = %v, want %v", got, want)
	}
	got = Chunk([]int{7}, 3)
	if want := [][]int{{7}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Chunk([7], 3) = %v, want %v", got, want)
	}
}

func TestChunkRefusesNonPositiveSizes(t *testing.T) {
	if got := Chunk([]int{1, 2}, 0); got != nil {
		t.Errorf("Chunk([1 2], 0) = %v, want nil", got)
	}
}

func TestMeanOfValues(t *testing.T) {
	if got := Mean([]float64{1, 2, 3, 6}); got != 3 {
		t.Errorf("Mean([1 2 3 6]) = %v, want 3", got)
	}
}

func TestMeanOfNothingIsZero(t *testing.T) {
	if got := Mean(nil); got != 0 {
		t.Errorf("Mean(nil) = %v, want 0", got)
	}
	if got := Mean([]float64{}); got != 0 {
		t.Errorf("Mean([]) = %v, want 0", got)
	}
}

func TestMovingAverageGivesEveryWindow(t *testing.T) {
	got := MovingAverage([]float64{1, 2, 3, 4}, 2)
	if want := []float64{1.5, 2.5, 3.5}; !reflect.DeepEqual(got, want) {
		t.Errorf("MovingAverage([1 2 3 4], 2) = %v, want %v", got, want)
	}
}

func TestMovingAverageOverTheWholeSlice(t *testing.T) {
	got := MovingAverage([]float64{2, 4, 6}, 3)
	if want := []float64{4}; !reflect.DeepEqual(got, want) {
		t.Errorf("MovingAverage([2 4 6], 3) = %v, want %v", got, want)
	}
}

func TestMovingAverageOfATooWideWindow(t *testing.T) {
	if got := MovingAverage([]float64{1, 2}, 3); len(got) != 0 {
		t.Errorf("MovingAverage([1 2], 3) = %v, want none", got)
	}
}
