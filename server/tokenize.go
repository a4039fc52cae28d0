package server

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"unicode/utf8"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/openai"
	"github.com/hexserve/hexserve/overflow"
)

type tokenizeRequest struct {
	Content          *string `json:"content"`
	Prompt           *string `json:"prompt"` // alias of content
	AddSpecialTokens bool    `json:"add_special_tokens"`
	ParseSpecial     *bool   `json:"parse_special"` // default true
	WithPieces       bool    `json:"with_pieces"`
	Model            string  `json:"model"` // "": the first configured model
}

type tokenizeResponse struct {
	Tokens      []int32  `json:"tokens"`
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Pieces      []string `json:"pieces,omitempty"`
}

// tokenize is POST /tokenize: text → token ids (llama.cpp/vLLM shape).
// add_special_tokens adds BOS; parse_special (default true) turns
// special-token text such as "<|eot_id|>" into its id. with_pieces adds each
// token's decoded text (invalid UTF-8 bytes become U+FFFD).
func (s *Server) tokenize(c *call, req *tokenizeRequest) error {
	m, err := c.model()
	if err != nil {
		return err
	}
	text := req.Content
	if text == nil {
		text = req.Prompt
	}
	if text == nil {
		return invalid("content", "'content' (or 'prompt') is required and must be a string.")
	}
	parseSpecial := req.ParseSpecial == nil || *req.ParseSpecial
	ids := m.Tokenizer.Encode(*text, req.AddSpecialTokens, parseSpecial)
	if ids == nil {
		ids = []int32{}
	}
	resp := tokenizeResponse{Tokens: ids, Count: len(ids), MaxModelLen: m.ContextLen}
	if req.WithPieces {
		resp.Pieces = make([]string, len(ids))
		for i, id := range ids {
			resp.Pieces[i] = string(m.Tokenizer.Piece(id))
		}
	}
	writeJSON(c.w, http.StatusOK, resp)
	return nil
}

// detokenize is POST /detokenize: token ids → text, special tokens included.
func (s *Server) detokenize(c *call, req *detokenizeRequest) error {
	m, err := c.model()
	if err != nil {
		return err
	}
	if req.Tokens == nil {
		return invalid("tokens", "'tokens' is required and must be an array of token ids.")
	}
	ids := make([]int32, len(*req.Tokens))
	raw := 0 // the pieces' bytes: the text, and so the reply, is at least as long
	for i, id := range *req.Tokens {
		if id < 0 || id > math.MaxInt32 {
			return badToken(i, id, m)
		}
		if _, ok := m.Tokenizer.TokenString(int32(id)); !ok {
			return badToken(i, id, m)
		}
		ids[i] = int32(id)
		if raw += len(m.Tokenizer.Piece(ids[i])); raw > detokenizeReplyLimit {
			return replyTooLarge(len(ids))
		}
	}
	reply := detokenizeReply{Content: m.Tokenizer.Decode(ids, false)}
	if replyLen(reply.Content) > detokenizeReplyLimit {
		return replyTooLarge(len(ids))
	}
	writeJSON(c.w, http.StatusOK, reply)
	return nil
}

// detokenizeReplyLimit bounds a /detokenize reply in bytes. A request is
// bounded by server.body_limit, but a token's text can be over 100 bytes
// (6 bytes a control byte once escaped), so a body of ids could otherwise
// ask for a reply 20 times its size.
const detokenizeReplyLimit = 4 << 20

type detokenizeReply struct {
	Content string `json:"content"`
}

// replyLen is the length of the JSON writeJSON writes for a detokenizeReply
// with content s: encoding/json's escapes, HTML characters left as they are.
func replyLen(s string) int {
	n := len(`{"content":""}` + "\n")
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '"' || r == '\\' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
			n += 2
		case r < 0x20 || r == '\u2028' || r == '\u2029' || r == utf8.RuneError && size == 1:
			n += 6 // \u00XX, \u2028, \u2029, \ufffd
		default:
			n += size
		}
	}
	return n
}

func replyTooLarge(n int) error {
	return invalid("tokens", "The text of these %d tokens is more than the reply limit of %d bytes. Please detokenize fewer tokens at a time.",
		n, detokenizeReplyLimit)
}

type detokenizeRequest struct {
	Tokens *[]int64 `json:"tokens"`
	Model  string   `json:"model"` // "": the first configured model
}

func badToken(i int, id int64, m *Model) error {
	return invalid(fmt.Sprintf("tokens[%d]", i), "Token id %d at tokens[%d] is not in the vocabulary (size %d).",
		id, i, m.Tokenizer.VocabSize())
}

type applyTemplateRequest struct {
	Messages            []openai.Message       `json:"messages"`
	Tools               []json.RawMessage      `json:"tools"`
	AddGenerationPrompt *bool                  `json:"add_generation_prompt"` // default true
	ChatTemplateKwargs  *openai.TemplateKwargs `json:"chat_template_kwargs"`
	ReasoningEffort     string                 `json:"reasoning_effort"`
	Model               string                 `json:"model"` // "": the first configured model
	// ContextOverflow and MaxTokens fit the messages in the window as chat
	// completions would ("": the model's policy, else error).
	ContextOverflow string `json:"context_overflow"`
	MaxTokens       *int   `json:"max_tokens"`
}

// applyTemplate is POST /apply-template (llama.cpp's shape): messages → the
// prompt text the model's chat template renders, with the fields a chat
// request takes: tools, chat_template_kwargs (date_string, custom_tools and
// tools_in_user_message as in chat completions, the others as template
// variables), reasoning_effort ("none"/"minimal": enable_thinking false)
// and context_overflow (else the model's), which leaves out what chat
// completions would, so the prompt is the one that would be read.
func (s *Server) applyTemplate(c *call, req *applyTemplateRequest) error {
	if _, err := c.model(); err != nil {
		return err
	}
	msgs, err := openai.ToChatMessages(req.Messages)
	if err != nil {
		return err
	}
	p := c.params()
	opt := p.ChatOptions()
	if opt.Tools, err = req.ChatTemplateKwargs.Apply(&opt, req.Tools); err != nil {
		return err
	}
	if err := apiconv.ReasoningEffort(&opt, req.ReasoningEffort, "reasoning_effort"); err != nil {
		return err
	}
	if req.AddGenerationPrompt != nil {
		opt.AddGenerationPrompt = *req.AddGenerationPrompt
	}
	pol, err := p.Policy(req.ContextOverflow, "context_overflow", overflow.Error)
	if err != nil {
		return err
	}
	maxTokens := p.MaxTokens
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	if pol.Truncates() {
		f, err := p.FitChat(msgs, opt, "", pol, maxTokens)
		if err != nil {
			return err
		}
		msgs = f.Messages
	}
	prompt, err := chat.Render(msgs, opt)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, map[string]string{"prompt": prompt})
	return nil
}
