package server

import (
	"net/http"
	"strconv"

	"github.com/rs/zerolog"
)

// HeaderTruncated is the response header that says how many messages (a
// raw prompt: tokens) a context_overflow policy left out of the prompt.
const HeaderTruncated = "X-Hexserve-Context-Truncated"

// truncated is apiconv.Params.Truncated for a request answered on w: the
// header, and a WARN line in the request's log.
func truncated(w http.ResponseWriter, r *http.Request, model string) func(dropped, promptTokens int) {
	return func(dropped, promptTokens int) {
		w.Header().Set(HeaderTruncated, strconv.Itoa(dropped))
		zerolog.Ctx(r.Context()).Warn().Str("model", model).Int("dropped", dropped).Int("prompt_tokens", promptTokens).
			Str("path", r.URL.Path).Msg("prompt over the context window: older turns left out (context_overflow)")
	}
}
