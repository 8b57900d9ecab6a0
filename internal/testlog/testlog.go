// Package testlog holds what tests need to read logs written by code
// running in other goroutines.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for a logger's concurrent writes: the
// sink of a slog handler whose output a test reads with String.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
