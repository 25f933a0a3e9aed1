module example.com/go-key

go 1.24

require github.com/warrenmq/warren/sdk v0.0.0-00010101000000-000000000000

// The SDK is not published yet: this points at the repository's copy.
// Outside the repository, point it at your checkout's sdk folder (see
// sdk/README.md), or drop the line once the module is published.
replace github.com/warrenmq/warren/sdk => ../..
