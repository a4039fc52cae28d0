package grammar

import (
	"context"
	"fmt"
)

// Limits bound what compiling and matching one grammar may cost; the zero
// value of a field takes its default (docs/api.md lists them).
type Limits struct {
	// Steps is the work allowed for compiling one grammar, and again for
	// each token's mask: one step is about one automaton edge or parse
	// thread visited.
	Steps int64
	// MaxStates bounds the DFA states of one pattern (its NFA may have
	// five times as many).
	MaxStates int
	// MaxBranches bounds the parse threads (the ways the output so far can
	// be read: overlapping anyOf branches) alive at once.
	MaxBranches int
	// Memory bounds the bytes of one grammar's automaton tables.
	Memory int64
}

// Defaults of Limits.
const (
	DefaultSteps       = 20_000_000
	DefaultMaxStates   = 4000
	DefaultMaxBranches = 64
	DefaultMemory      = 64 << 20
)

// MaxDepth bounds the nesting of a schema document in JSON objects and
// arrays (64 levels of properties), as chat.MaxToolDepth bounds a tool's.
const MaxDepth = 128

func (l Limits) withDefaults() Limits {
	if l.Steps <= 0 {
		l.Steps = DefaultSteps
	}
	if l.MaxStates <= 0 {
		l.MaxStates = DefaultMaxStates
	}
	if l.MaxBranches <= 0 {
		l.MaxBranches = DefaultMaxBranches
	}
	if l.Memory <= 0 {
		l.Memory = DefaultMemory
	}
	return l
}

// budget counts the work of one compile or one mask. Over its steps or
// memory, or once ctx is done, spend panics with a budgetError (a compile
// recovers it into an Error naming the schema part, a mask into the
// matcher's error).
type budget struct {
	ctx   context.Context
	lim   Limits
	left  int64 // steps left
	mem   int64 // bytes left
	check int64 // steps until ctx is checked again
}

// ctxEvery is how many steps pass between two checks of the context.
const ctxEvery = 1 << 14

func newBudget(ctx context.Context, l Limits) *budget {
	l = l.withDefaults()
	return &budget{ctx: ctx, lim: l, left: l.Steps, mem: l.Memory, check: ctxEvery}
}

type budgetError struct{ err error }

// ErrBudget is the error (wrapped) of a compile or mask over its Limits.
var ErrBudget = fmt.Errorf("grammar: over budget")

// spend takes n steps; a nil budget is unlimited.
func (b *budget) spend(n int64) {
	if b == nil {
		return
	}
	take(&b.left, n, "it needs more than %d steps of work (structured.compile_budget)", b.lim.Steps)
	if b.check -= n; b.check <= 0 {
		b.check = ctxEvery
		if b.ctx != nil {
			if err := b.ctx.Err(); err != nil {
				panic(budgetError{err})
			}
		}
	}
}

// take counts n against *left; past zero it panics with ErrBudget and the
// limit passed (format names it, %d standing for limit).
func take(left *int64, n int64, format string, limit int64) {
	if *left -= n; *left < 0 {
		over(format, limit)
	}
}

func over(format string, limit int64) {
	panic(budgetError{fmt.Errorf("%w: "+format, ErrBudget, limit)})
}

// alloc takes n bytes of automaton tables.
func (b *budget) alloc(n int64) {
	if b == nil {
		return
	}
	take(&b.mem, n, "its automaton tables need more than %d bytes (structured.memory)", b.lim.Memory)
	b.spend(n / 256)
}

// catch turns a budget panic into *err (any other panic goes on).
func catch(e any, err *error) {
	if e == nil {
		return
	}
	if be, ok := e.(budgetError); ok {
		*err = be.err
		return
	}
	panic(e)
}
