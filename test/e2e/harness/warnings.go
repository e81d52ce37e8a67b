package harness

import (
	"strings"
	"sync"
)

// Warnings records the API server's warning headers (admission warnings):
// set it as a rest.Config's WarningHandler.
type Warnings struct {
	mu   sync.Mutex
	msgs []string
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *Warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// List returns the warnings received so far, in order.
func (w *Warnings) List() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

// All returns them joined by newlines.
func (w *Warnings) All() string { return strings.Join(w.List(), "\n") }

// Reset forgets them.
func (w *Warnings) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = nil
}
