package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/openai"
	"github.com/hexserve/hexserve/server"
)

func respBody(extra string) string {
	return object(`"model":"`+modelID+`","input":"Hi"`, extra)
}

// TestResponsesBadInput is the bad-input table of /v1/responses: each case
// gets its status and OpenAI error body, and the server keeps serving.
func TestResponsesBadInput(t *testing.T) {
	r := newRig(t, rigOptions{})
	rAuth := newRig(t, rigOptions{opts: server.Options{APIKeys: []string{apiKey}}})
	long := strings.Repeat("hello ", 600) // > 512 tokens of context
	pairs := make([]string, 17)
	for i := range pairs {
		pairs[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	meta17 := "{" + strings.Join(pairs, ",") + "}" // OpenAI allows 16
	const path = "/v1/responses"
	for _, c := range []badCase{
		{name: "invalid JSON", body: `{"model":`, status: 400},
		{name: "empty body", body: ``, status: 400, contains: []string{"empty"}},
		{name: "missing model", body: `{"input":"Hi"}`, status: 400, param: "model"},
		{name: "unknown model", body: `{"model":"nope","input":"Hi"}`, status: 404, code: "model_not_found", param: "model"},
		{name: "missing input", body: `{"model":"` + modelID + `"}`, status: 400, param: "input"},
		{name: "empty input list", body: `{"model":"` + modelID + `","input":[]}`, status: 400, param: "input"},
		{name: "wrong type input", body: `{"model":"` + modelID + `","input":5}`, status: 400, param: "input"},
		{name: "wrong type temperature", body: respBody(`"temperature":"hot"`), status: 400, param: "temperature"},
		{name: "temperature out of range", body: respBody(`"temperature":3`), status: 400, param: "temperature"},
		{name: "top_p out of range", body: respBody(`"top_p":0`), status: 400, param: "top_p"},
		{name: "max_output_tokens below 16", body: respBody(`"max_output_tokens":5`), status: 400, param: "max_output_tokens", contains: []string{">= 16"}},
		{name: "wrong type content", body: `{"model":"` + modelID + `","input":[{"role":"user","content":5}]}`, status: 400, param: "input[0].content"},
		{name: "wrong type item", body: `{"model":"` + modelID + `","input":[5]}`, status: 400, param: "input"},
		{name: "wrong type tools", body: respBody(`"tools":"x"`), status: 400, param: "tools"},
		{name: "wrong type metadata value", body: respBody(`"metadata":{"a":1}`), status: 400, param: "metadata"},
		{name: "bad role", body: `{"model":"` + modelID + `","input":[{"role":"robot","content":"x"}]}`, status: 400, param: "input[0].role"},
		{name: "image part", body: `{"model":"` + modelID + `","input":[{"role":"user","content":[{"type":"input_image","image_url":"http://x"}]}]}`, status: 400, param: "input[0].content[0].type", contains: []string{"image"}},
		{name: "unknown item type", body: `{"model":"` + modelID + `","input":[{"type":"web_search_call"}]}`, status: 400, param: "input[0].type"},
		{name: "item_reference", body: `{"model":"` + modelID + `","input":[{"type":"item_reference","id":"msg_1"}]}`, status: 400, param: "input[0].type"},
		{name: "function_call without call_id", body: `{"model":"` + modelID + `","input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, status: 400, param: "input[0].call_id"},
		{name: "function_call bad arguments", body: `{"model":"` + modelID + `","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{oops"}]}`, status: 400, param: "input[0].arguments"},
		{name: "function_call_output without output", body: `{"model":"` + modelID + `","input":[{"type":"function_call_output","call_id":"c"}]}`, status: 400, param: "input[0].output"},
		{name: "custom tool", body: respBody(`"tools":[{"type":"custom","name":"apply_patch"}]`), status: 400, param: "tools[0].type", contains: []string{`"custom"`}},
		{name: "local_shell tool", body: respBody(`"tools":[{"type":"local_shell"}]`), status: 400, param: "tools[0].type", contains: []string{`"local_shell"`}},
		{name: "forced hosted tool", body: respBody(`"tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}`), status: 400, param: "tool_choice", contains: []string{`hosted tool "web_search"`}},
		{name: "forced dated hosted tool", body: respBody(`"tool_choice":{"type":"web_search_preview_2025_03_11"}`), status: 400, param: "tool_choice", contains: []string{"cannot run"}},
		{name: "namespace without tools", body: respBody(`"tools":[{"type":"namespace","name":"crm","description":"CRM"}]`), status: 400, param: "tools[0].tools"},
		{name: "namespace with a custom tool", body: respBody(`"tools":[{"type":"namespace","name":"crm","tools":[{"type":"custom","name":"x"}]}]`), status: 400, param: "tools[0].tools[0].type"},
		{name: "namespace function without name", body: respBody(`"tools":[{"type":"namespace","name":"crm","tools":[{"type":"function"}]}]`), status: 400, param: "tools[0].tools[0].name"},
		{name: "namespace bad name", body: respBody(`"tools":[{"type":"namespace","name":"a.b","tools":[{"type":"function","name":"f"}]}]`), status: 400, param: "tools[0].name", contains: []string{"a-zA-Z0-9"}},
		{name: "duplicate function", body: respBody(`"tools":[{"type":"function","name":"f"},{"type":"function","name":"f"}]`), status: 400, param: "tools[1].name", contains: []string{"duplicate"}},
		{name: "forced unknown namespace function", body: respBody(`"tools":[{"type":"namespace","name":"crm","tools":[{"type":"function","name":"f"}]}],"tool_choice":{"type":"function","namespace":"crm","name":"g"}`), status: 400, param: "tool_choice.function.name", contains: []string{"crm.g"}},
		{name: "hosted tools left out", body: respBody(`"tools":[{"type":"web_search","external_web_access":false},{"type":"file_search","vector_store_ids":["vs_1"]},{"type":"code_interpreter","container":{"type":"auto"}},{"type":"image_generation"},{"type":"mcp","server_label":"x"},{"type":"computer_use_preview"}]`), status: 200},
		{name: "function tool without name", body: respBody(`"tools":[{"type":"function","parameters":{}}]`), status: 400, param: "tools[0].name"},
		{name: "tool_choice required", body: respBody(`"tool_choice":"required"`), status: 400, param: "tool_choice"},
		{name: "json_schema without a name", body: respBody(`"text":{"format":{"type":"json_schema","schema":{}}}`), status: 400, param: "text.format.name"},
		{name: "json_schema unsupported keyword", body: respBody(`"text":{"format":{"type":"json_schema","name":"x","schema":{"not":{}}}}`), status: 400, param: "text.format.schema.not", contains: []string{"not supported"}},
		{name: "format type", body: respBody(`"text":{"format":{"type":"yaml"}}`), status: 400, param: "text.format.type"},
		{name: "bad truncation", body: respBody(`"truncation":"middle"`), status: 400, param: "truncation"},
		{name: "too much metadata", body: respBody(`"metadata":` + meta17), status: 400, param: "metadata"},
		{name: "background", body: respBody(`"background":true`), status: 400, param: "background"},
		{name: "conversation", body: respBody(`"conversation":"conv_1"`), status: 400, param: "conversation"},
		{name: "include logprobs", body: respBody(`"include":["message.output_text.logprobs"]`), status: 400, param: "include[0]"},
		{name: "context exceeded", body: `{"model":"` + modelID + `","input":"` + long + `"}`, status: 400, code: "context_length_exceeded", param: "input"},
		{name: "unknown previous id", body: respBody(`"previous_response_id":"resp_nope"`), status: 404, code: "previous_response_not_found", param: "previous_response_id"},
		{name: "get unknown", method: "GET", path: path + "/resp_nope", status: 404, contains: []string{"resp_nope"}},
		{name: "get traversal", method: "GET", path: path + "/..%2F..%2Fetc", status: 404},
		{name: "delete unknown", method: "DELETE", path: path + "/resp_nope", status: 404},
		{name: "input_items unknown", method: "GET", path: path + "/resp_nope/input_items", status: 404},
		{name: "input_items bad limit", method: "GET", path: path + "/resp_nope/input_items?limit=0", status: 400, param: "limit"},
		{name: "input_items bad order", method: "GET", path: path + "/resp_nope/input_items?order=up", status: 400, param: "order"},
		{name: "put not allowed", method: "PUT", path: path + "/resp_x", status: 405, code: "method_not_allowed"},
		{name: "no key", rig: rAuth, body: respBody(""), status: 401, code: "invalid_api_key"},
		{name: "wrong key", rig: rAuth, body: respBody(""), hdr: []string{"Authorization", "Bearer sk-wrong"}, status: 401, code: "invalid_api_key"},
		{name: "unknown fields ignored, reasoning accepted", body: respBody(`"reasoning":{"effort":"high"},"frobnicate":1,"max_output_tokens":16`), status: 200},
	} {
		t.Run(c.name, func(t *testing.T) { c.check(t, r, path) })
	}
}

func decodeResponse(t *testing.T, rep reply) openai.Response {
	t.Helper()
	if rep.Status != 200 {
		t.Fatalf("status %d: %s", rep.Status, rep.Body)
	}
	var resp openai.Response
	if err := json.Unmarshal(rep.Body, &resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestResponsesLifecycle creates, continues, lists, retrieves and deletes
// stored responses, with the second turn reusing the first one's KV rows.
func TestResponsesLifecycle(t *testing.T) {
	r := newRig(t, rigOptions{})
	first := decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(`"instructions":"Be brief.","metadata":{"k":"v"},"temperature":0`)))
	if !strings.HasPrefix(first.ID, "resp_") || first.Object != "response" || first.Status != "completed" || first.Model != modelID ||
		len(first.Output) != 1 || first.Output[0].Type != "message" || first.Output[0].Role != "assistant" ||
		first.OutputText != " Hello there, general Kenobi." || first.Output[0].Content[0].Text != first.OutputText ||
		first.Metadata["k"] != "v" || first.Instructions == nil || *first.Instructions != "Be brief." || !first.Store {
		t.Fatalf("first response %+v", first)
	}
	u := first.Usage
	if u == nil || u.InputTokens == 0 || u.OutputTokens == 0 || u.TotalTokens != u.InputTokens+u.OutputTokens {
		t.Fatalf("usage %+v", u)
	}

	got := decodeResponse(t, r.do(t, "GET", "/v1/responses/"+first.ID, ""))
	if got.ID != first.ID || got.OutputText != first.OutputText || got.Usage.InputTokens != u.InputTokens {
		t.Fatalf("retrieved %+v", got)
	}

	second := decodeResponse(t, r.do(t, "POST", "/v1/responses",
		respBody(`"instructions":"Be brief.","input":"And again?","previous_response_id":"`+first.ID+`","temperature":0`)))
	if *second.PreviousResponseID != first.ID || second.Usage.InputTokens <= u.InputTokens+u.OutputTokens {
		t.Fatalf("second response %+v usage %+v", second, second.Usage)
	}
	// The whole first turn (prompt and reply) is a cached prefix.
	if c := second.Usage.InputTokensDetails.CachedTokens; c < u.InputTokens {
		t.Fatalf("cached_tokens %d, want >= %d (the first prompt)", c, u.InputTokens)
	}

	var list struct {
		Object  string
		Data    []openai.Item
		FirstID string `json:"first_id"`
		LastID  string `json:"last_id"`
		HasMore bool   `json:"has_more"`
	}
	rep := r.do(t, "GET", "/v1/responses/"+second.ID+"/input_items?order=asc", "")
	if err := json.Unmarshal(rep.Body, &list); err != nil || rep.Status != 200 {
		t.Fatalf("input_items %d %s", rep.Status, rep.Body)
	}
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0].Role != "user" || list.Data[0].Content[0].Text != "And again?" ||
		list.Data[0].Content[0].Type != "input_text" || list.FirstID != list.Data[0].ID || list.HasMore {
		t.Fatalf("input_items %s", rep.Body)
	}

	rep = r.do(t, "DELETE", "/v1/responses/"+first.ID, "")
	if rep.Status != 200 || !strings.Contains(string(rep.Body), `"deleted":true`) {
		t.Fatalf("delete %d %s", rep.Status, rep.Body)
	}
	if rep := r.do(t, "GET", "/v1/responses/"+first.ID, ""); rep.Status != 404 {
		t.Fatalf("get after delete: %d %s", rep.Status, rep.Body)
	}
	// The second response kept its own copy of the conversation.
	third := decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(`"previous_response_id":"`+second.ID+`"`)))
	if third.Usage.InputTokens <= second.Usage.InputTokens {
		t.Fatalf("third turn has %d input tokens, second %d", third.Usage.InputTokens, second.Usage.InputTokens)
	}

	unstored := decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(`"store":false`)))
	if unstored.Store || r.do(t, "GET", "/v1/responses/"+unstored.ID, "").Status != 404 {
		t.Fatalf("store:false response is retrievable")
	}
}

// TestResponsesOwner checks that a stored response is visible only to the
// API key that created it, and that the key itself is not stored.
func TestResponsesOwner(t *testing.T) {
	const other = "sk-other-key-9876543210"
	r := newRig(t, rigOptions{opts: server.Options{APIKeys: []string{apiKey, other}}})
	a, b := []string{"Authorization", "Bearer " + apiKey}, []string{"x-api-key", other}
	resp := decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(""), a...))
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/responses/" + resp.ID, ""},
		{"GET", "/v1/responses/" + resp.ID + "/input_items", ""},
		{"POST", "/v1/responses", respBody(`"previous_response_id":"` + resp.ID + `"`)},
		{"DELETE", "/v1/responses/" + resp.ID, ""},
	} {
		if rep := r.do(t, c.method, c.path, c.body, b...); rep.Status != 404 {
			t.Errorf("%s %s with another key: %d %s", c.method, c.path, rep.Status, rep.Body)
		}
	}
	if rep := r.do(t, "GET", "/v1/responses/"+resp.ID, "", a...); rep.Status != 200 {
		t.Fatalf("owner's GET: %d %s", rep.Status, rep.Body)
	}
}

// sseEvent is one `event: …` / `data: …` frame.
type sseEvent struct {
	Name string
	Data map[string]any
	Raw  string
}

func readEvents(t *testing.T, url, body string) []sseEvent {
	t.Helper()
	resp, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	var out []sseEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		name, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "event: ")
		if !ok {
			t.Fatalf("expected an event line, got %q", line)
		}
		data, _ := br.ReadString('\n')
		raw, ok := strings.CutPrefix(strings.TrimSuffix(data, "\n"), "data: ")
		if blank, _ := br.ReadString('\n'); !ok || blank != "\n" {
			t.Fatalf("malformed frame %q", data)
		}
		ev := sseEvent{Name: name, Raw: raw}
		if err := json.Unmarshal([]byte(raw), &ev.Data); err != nil || ev.Data["type"] != name {
			t.Fatalf("frame %q: %v", raw, err)
		}
		out = append(out, ev)
	}
	return out
}

// checkSequence checks the event names and that sequence_number counts from 0.
func checkSequence(t *testing.T, evs []sseEvent, want []string) {
	t.Helper()
	var names []string
	for i, e := range evs {
		if n, _ := e.Data["sequence_number"].(float64); int(n) != i {
			t.Errorf("event %d %s has sequence_number %v", i, e.Name, e.Data["sequence_number"])
		}
		if len(names) == 0 || names[len(names)-1] != e.Name || e.Name != "response.output_text.delta" {
			names = append(names, e.Name)
		}
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("events\n %v\nwant\n %v", names, want)
	}
}

func TestResponsesStream(t *testing.T) {
	r := newRig(t, rigOptions{})
	want := decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(`"temperature":0`)))
	evs := readEvents(t, r.URL, respBody(`"temperature":0,"stream":true`))
	checkSequence(t, evs, []string{"response.created", "response.in_progress", "response.output_item.added",
		"response.content_part.added", "response.output_text.delta", "response.output_text.done",
		"response.content_part.done", "response.output_item.done", "response.completed"})
	itemID := evs[2].Data["item"].(map[string]any)["id"]
	text := ""
	for _, e := range evs[3 : len(evs)-2] { // content_part.added … content_part.done
		if e.Data["item_id"] != itemID || e.Data["output_index"] != 0.0 || e.Data["content_index"] != 0.0 {
			t.Fatalf("event without the item's indices: %s", e.Raw)
		}
		if e.Name == "response.output_text.delta" {
			text += e.Data["delta"].(string)
		}
	}
	var final openai.Response
	b, _ := json.Marshal(evs[len(evs)-1].Data["response"])
	_ = json.Unmarshal(b, &final)
	if text != want.OutputText || final.OutputText != want.OutputText || final.Status != "completed" ||
		final.Usage.OutputTokens != want.Usage.OutputTokens || final.Output[0].ID != itemID {
		t.Fatalf("streamed %q, final %+v; want %q", text, final, want.OutputText)
	}
	if evs[0].Data["response"].(map[string]any)["status"] != "in_progress" {
		t.Fatalf("created: %s", evs[0].Raw)
	}
	// The streamed response was stored.
	if got := decodeResponse(t, r.do(t, "GET", "/v1/responses/"+final.ID, "")); got.OutputText != want.OutputText {
		t.Fatalf("stored stream response %+v", got)
	}
}

func TestResponsesIncomplete(t *testing.T) {
	tok := loadTok(t)
	r := newRig(t, rigOptions{script: tok.Encode(strings.Repeat(" word", 40), false, false)})
	resp := decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(`"max_output_tokens":16`)))
	if resp.Status != "incomplete" || resp.IncompleteDetails == nil || resp.IncompleteDetails.Reason != "max_output_tokens" ||
		resp.Usage.OutputTokens != 16 || resp.Output[0].Status != "incomplete" {
		t.Fatalf("response %+v", resp)
	}
	evs := readEvents(t, r.URL, respBody(`"max_output_tokens":16,"stream":true`))
	if last := evs[len(evs)-1]; last.Name != "response.incomplete" {
		t.Fatalf("last event %s", last.Raw)
	}
}

const weatherResponseTool = `"tools":[{"type":"function","name":"get_weather","description":"Weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}]`

func TestResponsesFunctionCall(t *testing.T) {
	tok := loadTok(t)
	r := newRig(t, rigOptions{script: tok.Encode(`{"name": "get_weather", "parameters": {"city": "Paris"}}`, false, false)})
	resp := decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(weatherResponseTool)))
	if len(resp.Output) != 1 || resp.OutputText != "" {
		t.Fatalf("output %+v", resp.Output)
	}
	call := resp.Output[0]
	if call.Type != "function_call" || call.Name != "get_weather" || *call.Arguments != `{"city":"Paris"}` ||
		!strings.HasPrefix(call.CallID, "call_") || !strings.HasPrefix(call.ID, "fc_") || call.Status != "completed" {
		t.Fatalf("call %+v", call)
	}

	evs := readEvents(t, r.URL, respBody(weatherResponseTool+`,"stream":true`))
	checkSequence(t, evs, []string{"response.created", "response.in_progress", "response.output_item.added",
		"response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.completed"})
	if d := evs[4].Data; d["arguments"] != `{"city":"Paris"}` || d["item_id"] != evs[2].Data["item"].(map[string]any)["id"] {
		t.Fatalf("arguments.done %s", evs[4].Raw)
	}

	// The output goes back with previous_response_id; the tool result renders.
	out := fmt.Sprintf(`"previous_response_id":%q,"input":[{"type":"function_call_output","call_id":%q,"output":"{\"temperature_c\":18}"}]`, resp.ID, call.CallID)
	next := decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(out+`,"tool_choice":"none"`)))
	if next.Output[0].Type != "message" || next.Usage.InputTokensDetails.CachedTokens == 0 {
		t.Fatalf("after the tool result %+v", next)
	}
	// Without a stored response, the whole conversation can be sent as items.
	items := (`"input":[{"role":"user","content":"Weather?"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call_output","call_id":"call_1","output":[{"type":"input_text","text":"18C"}]}],"store":false`)
	decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(items)))
}

// codexTools is the shape of Codex CLI's default tool list: functions, a
// namespace of functions and a hosted web_search.
const codexTools = `"tools":[{"type":"function","name":"exec_command","description":"Runs a command","strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}},` +
	`{"type":"namespace","name":"multi_agent_v1","description":"Tools for sub-agents.","tools":[` +
	`{"type":"function","name":"spawn_agent","description":"Spawn an agent","strict":false,"parameters":{"type":"object","properties":{"message":{"type":"string"}}}},` +
	`{"type":"function","name":"close_agent","description":"Close an agent","strict":false,"parameters":{"type":"object","properties":{"target":{"type":"string"}}}}]},` +
	`{"type":"web_search","external_web_access":false}]`

// TestResponsesNamespaceCall: a namespace's function is offered under its
// qualified name, and the model's call of it comes back as OpenAI sends
// it, namespace and name apart (whole and streamed); the call sent back as
// input renders, and a function of the namespace can be forced.
func TestResponsesNamespaceCall(t *testing.T) {
	tok := loadTok(t)
	r := newRig(t, rigOptions{script: tok.Encode(`{"name": "multi_agent_v1.spawn_agent", "parameters": {"message": "hi"}}`, false, false)})
	resp := decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(codexTools)))
	if len(resp.Output) != 1 {
		t.Fatalf("output %+v", resp.Output)
	}
	call := resp.Output[0]
	if call.Type != "function_call" || call.Namespace != "multi_agent_v1" || call.Name != "spawn_agent" || *call.Arguments != `{"message":"hi"}` {
		t.Fatalf("call %+v", call)
	}
	if !strings.Contains(string(r.do(t, "POST", "/v1/responses", respBody(codexTools)).Body), `"namespace":"multi_agent_v1","name":"spawn_agent"`) {
		t.Fatal("the call's JSON does not carry namespace and name")
	}
	evs := readEvents(t, r.URL, respBody(codexTools+`,"stream":true`))
	done := evs[len(evs)-2].Data["item"].(map[string]any)
	if done["namespace"] != "multi_agent_v1" || done["name"] != "spawn_agent" {
		t.Fatalf("streamed item %s", evs[len(evs)-2].Raw)
	}

	// Sent back as input with its output, the call renders: the prompt
	// grows by the call and the result.
	base := decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(codexTools+`,"store":false,"tool_choice":"none"`)))
	items := `"input":[{"role":"user","content":"Hello"},{"type":"function_call","call_id":"call_1","namespace":"multi_agent_v1","name":"spawn_agent","arguments":"{\"message\":\"hi\"}"},{"type":"function_call_output","call_id":"call_1","output":"agent a1"}],"store":false`
	next := decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(codexTools+`,`+items)))
	if next.Usage.InputTokens <= base.Usage.InputTokens {
		t.Fatalf("input tokens %d with the call, %d without", next.Usage.InputTokens, base.Usage.InputTokens)
	}

	// A namespace's function forced by namespace and name.
	forced := decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(codexTools+`,"tool_choice":{"type":"function","namespace":"multi_agent_v1","name":"spawn_agent"}`)))
	if c := forced.Output[0]; c.Type != "function_call" || c.Namespace != "multi_agent_v1" || c.Name != "spawn_agent" {
		t.Fatalf("forced call %+v", forced.Output)
	}
}

func TestResponsesTruncation(t *testing.T) {
	r := newRig(t, rigOptions{})
	var items []string
	items = append(items, `{"role":"developer","content":"Be brief."}`, `{"role":"user","content":"first"}`)
	for i := range 25 { // whole turns go: a user message and its reply
		items = append(items, `{"role":"user","content":"more"}`,
			fmt.Sprintf(`{"role":"assistant","content":%q}`, strings.Repeat(fmt.Sprintf("filler %d ", i), 10)))
	}
	items = append(items, `{"role":"user","content":"last"}`)
	input := `"input":[` + strings.Join(items, ",") + `]`
	rep := r.do(t, "POST", "/v1/responses", respBody(input+`,"truncation":"disabled"`))
	if e := decodeError(t, rep); rep.Status != 400 || orNull(e.Code) != "context_length_exceeded" || orNull(e.Param) != "input" {
		t.Fatalf("disabled: %d %s", rep.Status, rep.Body)
	}
	resp := decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(input+`,"truncation":"auto"`)))
	if resp.Truncation != "auto" || resp.Usage.InputTokens >= 512 || resp.Usage.InputTokens < 50 {
		t.Fatalf("auto: %+v", resp.Usage)
	}
}

// TestResponsesStreamFailure checks a model failure after the stream began:
// an error event (no internal details) and response.failed, and nothing stored.
func TestResponsesStreamFailure(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.Model.Fail(nil, fmt.Errorf("qnn: graphExecute: error 1011"))
	evs := readEvents(t, r.URL, respBody(`"stream":true`))
	n := len(evs)
	if n < 3 || evs[n-2].Name != "error" || evs[n-1].Name != "response.failed" || strings.Contains(evs[n-2].Raw, "1011") {
		t.Fatalf("events %+v", evs)
	}
	failed := evs[n-1].Data["response"].(map[string]any)
	if failed["status"] != "failed" || failed["error"].(map[string]any)["code"] != "server_error" {
		t.Fatalf("response.failed %s", evs[n-1].Raw)
	}
	if rep := r.do(t, "GET", "/v1/responses/"+failed["id"].(string), ""); rep.Status != 404 {
		t.Fatalf("a failed response was stored: %d", rep.Status)
	}
	r.assertHealthy(t)
}

func TestResponsesParallelToolCalls(t *testing.T) {
	tok := loadTok(t)
	two := `[{"name": "get_weather", "parameters": {"city": "Paris"}}, {"name": "get_weather", "parameters": {"city": "Rome"}}]`
	r := newRig(t, rigOptions{script: tok.Encode(two, false, false)})
	for _, tc := range []struct {
		extra string
		calls int
	}{{"", 2}, {`,"parallel_tool_calls":false`, 1}} {
		resp := decodeResponse(t, r.do(t, "POST", "/v1/responses", respBody(weatherResponseTool+tc.extra)))
		if len(resp.Output) != tc.calls || resp.Output[0].Type != "function_call" || resp.Output[0].CallID == resp.Output[len(resp.Output)-1].CallID && tc.calls > 1 {
			t.Errorf("%q: output %+v", tc.extra, resp.Output)
		}
		evs := readEvents(t, r.URL, respBody(weatherResponseTool+tc.extra+`,"stream":true`))
		added := 0
		for _, e := range evs {
			if e.Name == "response.output_item.added" {
				if e.Data["output_index"] != float64(added) {
					t.Errorf("output_index %v for item %d", e.Data["output_index"], added)
				}
				added++
			}
		}
		if added != tc.calls {
			t.Errorf("%q: %d streamed items", tc.extra, added)
		}
	}
}
