// Package e2e holds end-to-end tests that start the real hexserve binary
// (HEXSERVE_BIN, set by `make gotest`; built from ./cmd/server once when
// unset) on a tiny hostsim bundle and drive it over HTTP and with the
// official openai-go SDK. Without the hostsim libraries the tests skip.
// e2e/node holds the same kind of checks for the openai Node SDK.
package e2e
