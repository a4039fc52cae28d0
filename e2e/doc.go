// Package e2e holds end-to-end tests that start the real hexserve binary
// (HEXSERVE_BIN, set by `make gotest`) on a tiny hostsim bundle and drive it
// with the official openai-go SDK. Without the binary the tests skip.
// e2e/node holds the same kind of checks for the openai Node SDK.
package e2e
