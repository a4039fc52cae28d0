package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/openai"
	"github.com/hexserve/hexserve/respstore"
)

// createResponse is POST /v1/responses.
func (s *Server) createResponse(c *call, req *openai.ResponseRequest) error {
	m, err := c.model()
	if err != nil {
		return err
	}
	r := c.r
	owner := requestOwner(r.Context())
	var prev *openai.StoredResponse
	if id := req.PreviousResponseID; id != nil && *id != "" {
		if prev, err = s.storedResponse(*id, owner); err != nil {
			return &APIError{Status: http.StatusNotFound, Type: TypeInvalidRequest, Param: "previous_response_id",
				Code: "previous_response_not_found", Message: fmt.Sprintf("Previous response with id '%s' not found.", *id)}
		}
	}
	g, err := openai.FromResponseRequest(req, prev, c.params(), apiconv.NewID("resp_"), time.Now().Unix())
	if err != nil {
		return err
	}
	g.Response.Model = m.ID
	for _, t := range g.LeftOut {
		if _, logged := s.leftOut.LoadOrStore(t, true); !logged {
			zerolog.Ctx(r.Context()).Info().Str("tool_type", t).
				Msg("hosted tool left out of the prompt: this server cannot run it (logged once per type)")
		}
	}
	return c.generate(&g.Request, g.Stream, reply{
		whole:  func(res inference.Result) any { return openai.FinishResponse(g, res) },
		stream: func() eventStream { return responseStream{c.sse(), openai.NewResponseStream(g)} },
		done:   func() { s.storeResponse(r, g, owner) },
	})
}

// responseStream is the Responses API stream: named events, and
// response.failed when generation fails; it has no [DONE].
type responseStream struct {
	*sseWriter
	st *openai.ResponseStream
}

func (c responseStream) start() { sendEvents(c.sseWriter, c.st.Start()) }

func (c responseStream) event(ev inference.Event) { sendEvents(c.sseWriter, c.st.Event(ev)) }

func (responseStream) committed() bool { return true } // response.created went out first

func (c responseStream) fail(api *APIError) {
	sendEvents(c.sseWriter, c.st.Fail(api.Code, api.Message, api.Param))
}

func (responseStream) finish() {}

func sendEvents(sse *sseWriter, evs []*openai.ResponseEvent) {
	for _, e := range evs {
		_ = sse.SendEvent(e.Type, e)
	}
}

// storeResponse keeps a finished response when the request asked for it.
func (s *Server) storeResponse(r *http.Request, g *openai.ResponseGeneration, owner string) {
	if !g.Store {
		return
	}
	data, err := json.Marshal(openai.StoredResponse{Response: g.Response, Input: g.Input, History: g.History})
	if err == nil {
		err = s.store.Put(g.Response.ID, owner, data)
	}
	if err != nil {
		zerolog.Ctx(r.Context()).Warn().Err(err).Str("response_id", g.Response.ID).Msg("response not stored")
	}
}

// storedResponse loads a stored response of owner.
func (s *Server) storedResponse(id, owner string) (*openai.StoredResponse, error) {
	data, ok := s.store.Get(id, owner)
	if !ok {
		return nil, errResponseNotFound(id)
	}
	var sr openai.StoredResponse
	if err := json.Unmarshal(data, &sr); err != nil || sr.Response == nil {
		return nil, fmt.Errorf("stored response %s is corrupt: %v", id, err)
	}
	return &sr, nil
}

func errResponseNotFound(id string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: TypeInvalidRequest,
		Message: fmt.Sprintf("Response with id '%s' not found.", id)}
}

// getResponse is GET /v1/responses/{id}.
func (s *Server) getResponse(w http.ResponseWriter, r *http.Request) error {
	if v := r.URL.Query().Get("stream"); v == "true" {
		return invalid("stream", "streaming a stored response is not supported")
	}
	sr, err := s.storedResponse(chi.URLParam(r, "id"), requestOwner(r.Context()))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sr.Response)
	return nil
}

// deleteResponse is DELETE /v1/responses/{id}.
func (s *Server) deleteResponse(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "id")
	if !s.store.Delete(id, requestOwner(r.Context())) {
		return errResponseNotFound(id)
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response.deleted", "deleted": true})
	return nil
}

// inputItemList is the body of GET /v1/responses/{id}/input_items.
type inputItemList struct {
	Object  string        `json:"object"` // "list"
	Data    []openai.Item `json:"data"`
	FirstID *string       `json:"first_id"`
	LastID  *string       `json:"last_id"`
	HasMore bool          `json:"has_more"`
}

// listInputItems is GET /v1/responses/{id}/input_items: the response's input
// items (without the conversation it continued), newest first unless
// order=asc, paged by limit (1–100, default 20) and after (an item id).
func (s *Server) listInputItems(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := queryLimit(q, 100)
	if err != nil {
		return err
	}
	order := q.Get("order")
	if order == "" {
		order = "desc"
	}
	if order != "asc" && order != "desc" {
		return invalid("order", "order must be \"asc\" or \"desc\", got %q", order)
	}
	sr, err := s.storedResponse(chi.URLParam(r, "id"), requestOwner(r.Context()))
	if err != nil {
		return err
	}
	items := slices.Clone(sr.Input)
	if order == "desc" {
		slices.Reverse(items)
	}
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(items, func(it openai.Item) bool { return it.ID == after })
		if i < 0 {
			return invalid("after", "no input item with id %q", after)
		}
		items = items[i+1:]
	}
	out := inputItemList{Object: "list", Data: items, HasMore: len(items) > limit}
	if out.HasMore {
		out.Data = items[:limit]
	}
	if n := len(out.Data); n > 0 {
		out.FirstID, out.LastID = &out.Data[0].ID, &out.Data[n-1].ID
	} else {
		out.Data = []openai.Item{}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// defaultResponseStore is the store of a server given none.
func defaultResponseStore() *respstore.Store {
	st, _ := respstore.Open(respstore.Options{}) // memory only: cannot fail
	return st
}

// queryLimit is a list's limit query parameter: 1 to most, 20 when absent.
func queryLimit(q url.Values, most int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return 20, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, invalid("limit", "limit must be an integer between 1 and %d, got %q", most, v)
	}
	return n, nil
}
