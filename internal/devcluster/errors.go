package devcluster

import (
	"errors"
	"fmt"
)

// Sentinel errors; check with errors.Is.
var (
	// ErrAlreadyUp: the state directory belongs to a running cluster.
	ErrAlreadyUp = errors.New("a local cluster is already running")
	// ErrPortInUse: a port the cluster needs is taken by another process.
	ErrPortInUse = errors.New("port in use")
)

// ComponentError says which component failed and shows the end of its log.
type ComponentError struct {
	Component string
	Log       string
	Tail      string
	Err       error
}

func (e *ComponentError) Error() string {
	return fmt.Sprintf("%s failed: %v\n--- last lines of %s ---\n%s\n---", e.Component, e.Err, e.Log, e.Tail)
}

func (e *ComponentError) Unwrap() error { return e.Err }
