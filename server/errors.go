package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/grammar"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/upstream"
	"github.com/rs/zerolog"
)

// StatusClientClosedRequest is nginx's status for a client that went away
// before the response; it only reaches the access log and metrics.
const StatusClientClosedRequest = 499

// OpenAI error types.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeServer         = "server_error"
)

// APIError is an error with its HTTP status and OpenAI error body. Handlers
// return one for failures they classify themselves; errorFor maps the rest.
type APIError struct {
	Status  int
	Type    string // TypeInvalidRequest or TypeServer
	Code    string // "" is JSON null
	Param   string // "" is JSON null
	Message string
	// RetryAfter, when > 0, is sent as the Retry-After header (seconds).
	RetryAfter int
}

func (e *APIError) Error() string { return e.Message }

// errorBody is the OpenAI error envelope.
type errorBody struct {
	Error errorFields `json:"error"`
}

type errorFields struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Body returns the error's OpenAI JSON body.
func (e *APIError) Body() any {
	return errorBody{errorFields{Message: e.Message, Type: e.Type, Param: nullable(e.Param), Code: nullable(e.Code)}}
}

func invalid(param, format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}

// errLoading answers requests that need the model before it is loaded.
var errLoading = &APIError{Status: http.StatusServiceUnavailable, Type: TypeServer, Code: "model_loading",
	Message: "The model is still loading, please try again shortly.", RetryAfter: 5}

// errorFor is the one mapping from errors to statuses and OpenAI bodies.
// promptParam is the request field a context-length error refers to
// ("messages" or "prompt"). The bool reports an unexpected error whose
// details must stay in the log.
func errorFor(err error, promptParam string) (*APIError, bool) {
	var (
		api      *APIError
		ctxLen   *inference.ContextLengthError
		invReq   *inference.InvalidRequestError
		chatErr  *chat.Error
		tooLarge *http.MaxBytesError
		tooLong  *chat.LengthError
		upErr    *upstream.Error
	)
	switch {
	case errors.As(err, &api):
		return api, false
	case errors.As(err, &upErr):
		typ := TypeServer
		if upErr.Status < 500 {
			typ = TypeInvalidRequest
		}
		return &APIError{Status: upErr.Status, Type: typ, Code: upErr.Code, Message: upErr.Message, RetryAfter: upErr.RetryAfter}, false
	case errors.Is(err, errBodyMemory):
		return &APIError{Status: http.StatusServiceUnavailable, Type: TypeServer, Code: "server_overloaded",
			Message: "The server is reading too many request bodies at once (server.body_memory), please retry shortly.", RetryAfter: 1}, false
	case errors.Is(err, grammar.ErrBusy):
		return &APIError{Status: http.StatusServiceUnavailable, Type: TypeServer, Code: "server_overloaded",
			Message: "The server is compiling too many structured-output schemas at once (structured.max_compiles), please retry shortly.", RetryAfter: 1}, false
	case errors.Is(err, inference.ErrBusy):
		return &APIError{Status: http.StatusServiceUnavailable, Type: TypeServer, Code: "server_overloaded",
			Message: "The server is busy with other requests, please retry shortly.", RetryAfter: 1}, false
	case errors.Is(err, inference.ErrNoModel):
		return errLoading, false
	case errors.Is(err, inference.ErrClosed):
		return &APIError{Status: http.StatusServiceUnavailable, Type: TypeServer, Code: "server_shutting_down",
			Message: "The server is shutting down.", RetryAfter: 5}, false
	case errors.As(err, &ctxLen) && ctxLen.Kept != "":
		return &APIError{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Code: "context_length_exceeded",
			Param: promptParam, Message: fmt.Sprintf("This model's maximum context length is %d tokens. However, what "+
				"context_overflow keeps of your %s (%s) resulted in %d tokens. Please reduce the length of the %s.",
				ctxLen.ContextLen, promptParam, ctxLen.Kept, ctxLen.PromptTokens, promptParam)}, false
	case errors.As(err, &ctxLen):
		msg := fmt.Sprintf("This model's maximum context length is %d tokens. However, your %s resulted in %d tokens",
			ctxLen.ContextLen, promptParam, ctxLen.PromptTokens)
		if ctxLen.MaxTokens > 0 {
			msg += fmt.Sprintf(" and %d in the completion (max_tokens)", ctxLen.MaxTokens)
		}
		return &APIError{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Code: "context_length_exceeded",
			Param: promptParam, Message: msg + ". Please reduce the length of the " + promptParam + "."}, false
	case errors.As(err, &tooLong):
		return &APIError{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Code: "context_length_exceeded",
			Param: promptParam, Message: fmt.Sprintf("Your %s rendered to more than %d bytes of prompt text, more than this "+
				"model's context can hold. Please reduce the length of the %s or tools.", promptParam, tooLong.MaxBytes, promptParam)}, false
	case errors.As(err, &invReq):
		return invalid(invReq.Param, "%s", invReq.Message), false
	case errors.As(err, &chatErr):
		return invalid(chatErr.Param, "%s", chatErr.Message), false
	case errors.As(err, &tooLarge):
		return &APIError{Status: http.StatusRequestEntityTooLarge, Type: TypeInvalidRequest, Code: "request_too_large",
			Message: fmt.Sprintf("The request body is larger than the limit of %d bytes.", tooLarge.Limit)}, false
	case errors.Is(err, context.Canceled):
		return &APIError{Status: StatusClientClosedRequest, Type: TypeInvalidRequest, Code: "request_cancelled",
			Message: "The request was cancelled."}, false
	case errors.Is(err, context.DeadlineExceeded):
		return &APIError{Status: http.StatusGatewayTimeout, Type: TypeServer, Code: "timeout",
			Message: "The request timed out."}, false
	}
	return &APIError{Status: http.StatusInternalServerError, Type: TypeServer,
		Message: "The server had an error while processing your request."}, true
}

// writeError maps err and writes the error response in the shape of r's
// API. Unexpected errors are logged with their details; the client sees a
// generic message.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	writeAPIError(w, r, mapError(r, err, "request failed"))
}

// mapError maps err with r's API's mapping and logs it: an unexpected
// error with its details at error level (what names the failure), the rest
// at debug level.
func mapError(r *http.Request, err error, what string) *APIError {
	a := apiOf(r)
	api, unexpected := a.mapErr(err, a.prompt)
	log := zerolog.Ctx(r.Context())
	if unexpected {
		log.Error().Err(err).Str("path", r.URL.Path).Msg(what)
	} else {
		log.Debug().Err(err).Int("status", api.Status).Msg(what)
	}
	return api
}

// writeAPIError writes api in the error shape of r's API.
func writeAPIError(w http.ResponseWriter, r *http.Request, api *APIError) {
	w.Header().Del(HeaderTruncated) // no prompt was read
	if api.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(api.RetryAfter))
	}
	writeJSON(w, api.Status, apiOf(r).body(api))
}

// paramMessage is api's message led by the offending field's path when the
// message does not name it (the Ollama and Anthropic bodies have no param).
func paramMessage(api *APIError) string {
	if api.Param != "" && !strings.Contains(api.Message, api.Param) {
		return api.Param + ": " + api.Message
	}
	return api.Message
}

// writeJSON writes v as a JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client may be gone; nothing left to report to
}
