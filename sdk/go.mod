module github.com/warrenmq/warren/sdk

go 1.24
