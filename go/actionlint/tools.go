//go:build tools

// actionlint checks .github/workflows in scripts/test (a CI tool, not a
// part of the lab).
package tools

import _ "github.com/rhysd/actionlint/cmd/actionlint"
