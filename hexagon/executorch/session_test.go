package executorch

import (
	"sync"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
)

// sessions are the test sessions of models: evalOn(m).Eval evaluates a
// token sequence on one sequence of m's pool, as the engine's Steps would.
var sessions sync.Map // inference.Model → *inferencetest.Session

func evalOn(m inference.Model) *inferencetest.Session {
	s, _ := sessions.LoadOrStore(m, inferencetest.NewSession(m))
	return s.(*inferencetest.Session)
}
