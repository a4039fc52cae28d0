// Package repotest holds repository-wide tests: the layering rules between
// packages and the rule that every package has a doc comment. It has no
// non-test code.
package repotest
