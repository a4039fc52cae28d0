package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/rs/zerolog"
)

func TestErrorFor(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		status      int
		typ, code   string
		param       string
		retryAfter  int
		unexpected  bool
		wantMessage string
	}{
		{"api error passes through", ModelNotFound("x", "model"), 404, TypeInvalidRequest, "model_not_found", "model", 0, false, ""},
		{"busy", inference.ErrBusy, 503, TypeServer, "server_overloaded", "", 1, false, ""},
		{"wrapped busy", fmt.Errorf("submit: %w", inference.ErrBusy), 503, TypeServer, "server_overloaded", "", 1, false, ""},
		{"no model", inference.ErrNoModel, 503, TypeServer, "model_loading", "", 5, false, ""},
		{"closed", inference.ErrClosed, 503, TypeServer, "server_shutting_down", "", 5, false, ""},
		{"context length", &inference.ContextLengthError{PromptTokens: 600, ContextLen: 512}, 400, TypeInvalidRequest,
			"context_length_exceeded", "messages", 0, false,
			"This model's maximum context length is 512 tokens. However, your messages resulted in 600 tokens. Please reduce the length of the messages."},
		{"context length with max_tokens", &inference.ContextLengthError{PromptTokens: 500, MaxTokens: 100, ContextLen: 512}, 400,
			TypeInvalidRequest, "context_length_exceeded", "messages", 0, false,
			"This model's maximum context length is 512 tokens. However, your messages resulted in 500 tokens and 100 in the completion (max_tokens). Please reduce the length of the messages."},
		{"rendered too long", &chat.LengthError{MaxBytes: 65536}, 400, TypeInvalidRequest, "context_length_exceeded", "messages", 0, false,
			"Your messages rendered to more than 65536 bytes of prompt text, more than this model's context can hold. Please reduce the length of the messages or tools."},
		{"invalid request", &inference.InvalidRequestError{Param: "logit_bias", Message: "token id 999999 out of range"}, 400,
			TypeInvalidRequest, "", "logit_bias", 0, false, "token id 999999 out of range"},
		{"chat error", &chat.Error{Param: "messages[2].role", Message: "unknown role"}, 400, TypeInvalidRequest, "", "messages[2].role", 0, false, "unknown role"},
		{"too large", &http.MaxBytesError{Limit: 10}, 413, TypeInvalidRequest, "request_too_large", "", 0, false, ""},
		{"cancelled", fmt.Errorf("eval: %w", context.Canceled), 499, TypeInvalidRequest, "request_cancelled", "", 0, false, ""},
		{"deadline", context.DeadlineExceeded, 504, TypeServer, "timeout", "", 0, false, ""},
		{"other", errors.New("qnn: graphExecute returned 1002"), 500, TypeServer, "", "", 0, true,
			"The server had an error while processing your request."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, unexpected := errorFor(tt.err, "messages")
			if got.Status != tt.status || got.Type != tt.typ || got.Code != tt.code || got.Param != tt.param ||
				got.RetryAfter != tt.retryAfter || unexpected != tt.unexpected {
				t.Fatalf("errorFor(%v) = %+v, %v", tt.err, got, unexpected)
			}
			if tt.wantMessage != "" && got.Message != tt.wantMessage {
				t.Fatalf("message %q, want %q", got.Message, tt.wantMessage)
			}
		})
	}
}

func TestWriteError(t *testing.T) {
	req := httptest.NewRequest("POST", "/v1/completions", nil)
	req = withAPI(req.WithContext(zerolog.Nop().WithContext(req.Context())), openAIAPI.at("prompt"))
	rec := httptest.NewRecorder()
	writeError(rec, req, &inference.ContextLengthError{PromptTokens: 9, ContextLen: 8})
	e := apiErr(t, rec)
	if rec.Code != 400 || str(e.Param) != "prompt" || str(e.Code) != "context_length_exceeded" {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	writeError(rec, req, inference.ErrBusy)
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("busy: %d %v", rec.Code, rec.Header())
	}
	if e := apiErr(t, rec); e.Param != nil {
		t.Fatalf("param should be null: %s", rec.Body)
	}
}

func TestJSONParam(t *testing.T) {
	for in, want := range map[string]string{
		"temperature":              "temperature",
		"CommonParams.temperature": "temperature",
		"messages.content":         "messages.content",
		"Outer.Inner.stop":         "stop",
		"":                         "",
	} {
		if got := jsonParam(in); got != want {
			t.Errorf("jsonParam(%q) = %q, want %q", in, got, want)
		}
	}
}
