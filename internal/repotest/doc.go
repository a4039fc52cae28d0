// Package repotest holds repository-wide tests: the layering rules between
// packages, the rule that every package has a doc comment, the rule that
// docs/architecture.md names every package, and the phone build's
// dependency rule. It has no non-test code.
package repotest
