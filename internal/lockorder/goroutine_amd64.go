package lockorder

// goroutine identifies the calling goroutine by its runtime g, read from
// thread-local storage: a few nanoseconds, where runtime.Stack's header
// takes microseconds. A g is reused only after its goroutine ended, when
// it held nothing.
func goroutine() uintptr
