//go:build tools

// Package tools pins the main packages this wrapper builds, so that `go mod tidy` keeps them.
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
)
