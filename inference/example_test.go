package inference_test

import (
	"context"
	"fmt"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
)

func Example() {
	m := inferencetest.NewScripted(inference.ModelInfo{VocabSize: 100, EOS: []int32{99}}, []int32{1, 2, 3})
	v := inferencetest.NewVocab(map[int32]string{1: "Hello", 2: ",", 3: " world", 99: "<|eot_id|>"})
	e := inference.New(m, v, inference.Config{QueueLen: 4})
	defer e.Close()

	s, err := e.Submit(context.Background(), inference.Request{Prompt: []int32{7, 8}, Stop: []string{" wor"}})
	if err != nil {
		fmt.Println(err) // *InvalidRequestError, *ContextLengthError, ErrBusy, ErrClosed
		return
	}
	for ev := range s.Events() {
		switch {
		case ev.Done:
			fmt.Printf("done: %s, %d prompt + %d completion tokens\n", ev.Finish, ev.Usage.PromptTokens, ev.Usage.CompletionTokens)
		case ev.Finish != "":
			fmt.Printf("%q finish=%s\n", ev.Text, ev.Finish)
		default:
			fmt.Printf("%q\n", ev.Text)
		}
	}
	// Output:
	// "Hello"
	// ","
	// "" finish=stop
	// done: stop, 2 prompt + 3 completion tokens
}
