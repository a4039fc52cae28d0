package openai

import (
	"encoding/json"
	"errors"
	"github.com/hexserve/hexserve/apiconv"
	"testing"

	"github.com/hexserve/hexserve/inference"
)

// TestPrediction: both endpoints take a Predicted Outputs object (content
// as a string or text parts) into the engine request, and reject malformed
// ones naming the parameter.
func TestPrediction(t *testing.T) {
	tests := []struct {
		name, prediction string
		want             string // the engine's prediction
		param            string // non-empty: rejected with this param
	}{
		{"absent", `null`, "", ""},
		{"string", `{"type":"content","content":"def f():\n  return 1"}`, "def f():\n  return 1", ""},
		{"parts", `{"type":"content","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`, "ab", ""},
		{"empty", `{"type":"content","content":""}`, "", ""},
		{"not an object", `"text"`, "", "prediction"},
		{"wrong type", `{"type":"text","content":"x"}`, "", "prediction.type"},
		{"no content", `{"type":"content"}`, "", "prediction.content"},
		{"number content", `{"type":"content","content":3}`, "", "prediction.content"},
		{"bad part", `{"type":"content","content":[{"type":"image_url","image_url":{}}]}`, "", "prediction.content[0]"},
	}
	for _, tt := range tests {
		for _, endpoint := range []string{"chat", "completions"} {
			var g *Generation
			var err error
			if endpoint == "chat" {
				var r ChatCompletionRequest
				if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"hi"}],"prediction":`+tt.prediction+`}`), &r); err != nil {
					t.Fatal(err)
				}
				g, err = FromChatCompletionRequest(&r, apiconv.Params{Tokenizer: testTok(t)})
			} else {
				var r CompletionRequest
				if err := json.Unmarshal([]byte(`{"prompt":"hi","prediction":`+tt.prediction+`}`), &r); err != nil {
					t.Fatal(err)
				}
				g, err = FromCompletionRequest(&r, apiconv.Params{Tokenizer: testTok(t)})
			}
			var ie *inference.InvalidRequestError
			switch {
			case tt.param != "" && (!errors.As(err, &ie) || ie.Param != tt.param):
				t.Errorf("%s/%s: error %v, want one for param %q", endpoint, tt.name, err, tt.param)
			case tt.param == "" && err != nil:
				t.Errorf("%s/%s: %v", endpoint, tt.name, err)
			case tt.param == "" && g.Request.Prediction != tt.want:
				t.Errorf("%s/%s: prediction %q, want %q", endpoint, tt.name, g.Request.Prediction, tt.want)
			}
		}
	}
}
