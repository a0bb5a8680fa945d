package dtrain_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"dtrain.dev/dtrain"
)

// The Hugging Face fixtures of the repository (go test runs in bindings/go).
var (
	hfModels     = filepath.Join("..", "..", "tests", "fixtures", "hf", "models")
	hfTokenizers = filepath.Join("..", "..", "tests", "fixtures", "hf", "tokenizers")
	hfChat       = filepath.Join("..", "..", "tests", "fixtures", "hf", "chat_templates.json")
)

const unicodeText = "Héllo, \"wörld\" — what's 2+2? 😀 日本語 naïve\n\tcafé"

// conversation2 is chat_templates.json's conversation "2": a user turn and the answer.
var conversation2 = []dtrain.Message{
	{Role: "user", Content: "Héllo, \"wörld\" — what's 2+2? 😀"},
	{Role: "assistant", Content: "  It's 4.\n\nAnything else?  "},
}

// reference reads a fixture's reference.safetensors: its integer tensors (prompt_ids,
// greedy_ids: what transformers generated greedily).
func reference(t *testing.T, name string) map[string][]int32 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(hfModels, name, "reference.safetensors"))
	ok(t, err)
	n := binary.LittleEndian.Uint64(data[:8])
	var header map[string]json.RawMessage
	ok(t, json.Unmarshal(data[8:8+n], &header))
	body := data[8+n:]
	out := map[string][]int32{}
	for key, raw := range header {
		var tensor struct {
			DType   string   `json:"dtype"`
			Offsets [2]int64 `json:"data_offsets"`
		}
		if key == "__metadata__" || json.Unmarshal(raw, &tensor) != nil || tensor.DType != "I64" {
			continue
		}
		for at := tensor.Offsets[0]; at < tensor.Offsets[1]; at += 8 {
			out[key] = append(out[key], int32(binary.LittleEndian.Uint64(body[at:at+8])))
		}
	}
	return out
}

// greedy generates n tokens from prompt with model, greedily, on an engine of its own.
func greedy(t *testing.T, model *dtrain.Model, prompt []int32, n int) []int32 {
	t.Helper()
	opt := must(dtrain.NewOptimizer(model, "sgd", dtrain.Options{"lr": 0.0}))
	defer opt.Close()
	engine := must(dtrain.NewEngine(nil, model, opt, nil))
	defer engine.Close()
	out := must(engine.Generate([][]int32{prompt}, dtrain.Options{"max_new_tokens": n}))
	return out[0]
}

func TestHFModelGeneratesTheReference(t *testing.T) {
	defer guard(t)
	for name, arch := range map[string]string{"qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM"} {
		dir := filepath.Join(hfModels, name)
		ref := reference(t, name)
		info := must(dtrain.InspectHF(dir))
		if info.Architecture != arch || info.Parameters <= 0 || len(info.Files) == 0 {
			t.Fatalf("%s: InspectHF = %+v", name, info)
		}
		model := must(dtrain.NewModelFromHF(dir, nil))
		if got := model.ParamCount(); int64(got) != info.Parameters {
			t.Fatalf("%s: ParamCount %d, InspectHF %d", name, got, info.Parameters)
		}
		if got := greedy(t, model, ref["prompt_ids"], len(ref["greedy_ids"])); !reflect.DeepEqual(got, ref["greedy_ids"]) {
			t.Fatalf("%s: greedy %v, transformers %v", name, got, ref["greedy_ids"])
		}
		ok(t, model.Close())
	}
}

func TestHFSaveRoundTrip(t *testing.T) {
	defer guard(t)
	ref := reference(t, "qwen2")
	model := must(dtrain.NewModelFromHF(filepath.Join(hfModels, "qwen2"), dtrain.Options{"precision": "f32"}))
	defer model.Close()
	out := t.TempDir()
	ok(t, model.SaveHF(filepath.Join(out, "module"), dtrain.Options{
		"tokenizer_from": filepath.Join(hfTokenizers, "qwen2"), "eos_token_ids": []int32{7, 9}}))
	opt := must(dtrain.NewOptimizer(model, "sgd", nil))
	defer opt.Close()
	engine := must(dtrain.NewEngine(nil, model, opt, nil))
	defer engine.Close()
	ok(t, engine.SaveHF(filepath.Join(out, "engine"), dtrain.Options{"precision": "bf16"}))

	info := must(dtrain.InspectHF(filepath.Join(out, "module")))
	if !reflect.DeepEqual(info.EOSTokenIDs, []int32{7, 9}) || info.Parameters != int64(model.ParamCount()) {
		t.Fatalf("saved: %+v", info)
	}
	if info := must(dtrain.InspectHF(filepath.Join(out, "engine"))); info.StoredDType != "bf16" {
		t.Fatalf("the engine's save is %s, not bf16", info.StoredDType)
	}
	again := must(dtrain.NewModelFromHF(filepath.Join(out, "module"), nil))
	defer again.Close()
	if again.ParamCount() != model.ParamCount() {
		t.Fatalf("reloaded: %d parameters, saved %d", again.ParamCount(), model.ParamCount())
	}
	if got := greedy(t, again, ref["prompt_ids"], len(ref["greedy_ids"])); !reflect.DeepEqual(got, ref["greedy_ids"]) {
		t.Fatalf("reloaded greedy %v, want %v", got, ref["greedy_ids"])
	}
	bf16 := must(dtrain.NewModelFromHF(filepath.Join(out, "engine"), dtrain.Options{"precision": "stored"}))
	defer bf16.Close()
	if bf16.ParamCount() != model.ParamCount() {
		t.Fatal("the bf16 save has another parameter count")
	}
	// tokenizer_from copied the tokenizer: the saved directory is a tokenizer too.
	tok := must(dtrain.NewTokenizer(filepath.Join(out, "module"), ""))
	defer tok.Close()
	if got := must(tok.Encode(unicodeText, true)); len(got) == 0 || must(tok.Decode(got, true)) != unicodeText {
		t.Fatal("the copied tokenizer does not round-trip")
	}
}

func TestHFStopTokens(t *testing.T) {
	defer guard(t)
	ref := reference(t, "llama")
	model := must(dtrain.NewModelFromHF(filepath.Join(hfModels, "llama"), nil))
	defer model.Close()
	opt := must(dtrain.NewOptimizer(model, "sgd", nil))
	defer opt.Close()
	engine := must(dtrain.NewEngine(nil, model, opt, nil))
	defer engine.Close()
	stop := ref["greedy_ids"][2]
	want := ref["greedy_ids"][:3]
	for _, v := range []any{[]int32{stop, 0}, fmt.Sprint(stop)} {
		got := must(engine.Generate([][]int32{ref["prompt_ids"]}, dtrain.Options{"max_new_tokens": 8, "stop_tokens": v}))
		if !reflect.DeepEqual(got[0], want) {
			t.Fatalf("stop_tokens %v: %v, want %v", v, got[0], want)
		}
	}
}

// cases are tests/fixtures/hf/tokenizers/<family>/cases.json: what the tokenizers library gives.
func tokenizerCase(t *testing.T, family, text string) (c struct {
	IDs         []int32 `json:"ids"`
	IDsSpecial  []int32 `json:"ids_special"`
	Decoded     string  `json:"decoded"`
	DecodedSkip string  `json:"decoded_skip"`
}) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(hfTokenizers, family, "cases.json"))
	ok(t, err)
	var doc struct {
		Cases []json.RawMessage `json:"cases"`
	}
	ok(t, json.Unmarshal(data, &doc))
	for _, raw := range doc.Cases {
		var head struct {
			Text string `json:"text"`
		}
		ok(t, json.Unmarshal(raw, &head))
		if head.Text == text {
			ok(t, json.Unmarshal(raw, &c))
			return c
		}
	}
	t.Fatalf("%s: no case %q", family, text)
	return c
}

func TestTokenizerRoundTrip(t *testing.T) {
	defer guard(t)
	for _, family := range []string{"qwen2", "llama2"} {
		tok := must(dtrain.NewTokenizer(filepath.Join(hfTokenizers, family, "tokenizer.json"), ""))
		ids := must(tok.Encode(unicodeText, true))
		if len(ids) < 10 {
			t.Fatalf("%s: %d ids", family, len(ids))
		}
		if got := must(tok.Decode(ids, true)); got != unicodeText {
			t.Fatalf("%s: decode %q", family, got)
		}
		if tok.VocabSize() != 512 {
			t.Fatalf("%s: vocab %d", family, tok.VocabSize())
		}
		c := tokenizerCase(t, family, "❤️✨😀")
		if got := must(tok.Encode("❤️✨😀", false)); !reflect.DeepEqual(got, c.IDs) {
			t.Fatalf("%s: %v, tokenizers %v", family, got, c.IDs)
		}
		if got := must(tok.Encode("❤️✨😀", true)); !reflect.DeepEqual(got, c.IDsSpecial) {
			t.Fatalf("%s: with special tokens %v, tokenizers %v", family, got, c.IDsSpecial)
		}
		if got := must(tok.Decode(c.IDsSpecial, false)); got != c.Decoded {
			t.Fatalf("%s: decoded %q, tokenizers %q", family, got, c.Decoded)
		}
		if got := must(tok.Decode(c.IDsSpecial, true)); got != c.DecodedSkip {
			t.Fatalf("%s: decoded %q, tokenizers %q", family, got, c.DecodedSkip)
		}
		if got := must(tok.Decode(nil, true)); got != "" {
			t.Fatalf("%s: decode of no ids %q", family, got)
		}
		ok(t, tok.Close())
	}
}

func TestTokenizerSpecialTokensAndInfo(t *testing.T) {
	defer guard(t)
	tok := must(dtrain.NewTokenizer(filepath.Join(hfTokenizers, "llama2", "tokenizer.json"), ""))
	defer tok.Close()
	bos := must(tok.TokenToID("<s>"))
	if ids := must(tok.Encode("hi", true)); ids[0] != bos {
		t.Fatalf("no BOS first: %v", ids)
	}
	info := must(tok.Info())
	if info.ChatTemplate || info.VocabSize != 512 || !containsSpecial(info.Special, bos, "<s>") {
		t.Fatalf("info %+v", info)
	}
	_, err := tok.TokenToID("no-such-token")
	wantErr(t, err, dtrain.ErrNotFound, "no-such-token")
	_, err = tok.ApplyChatTemplate(conversation2, true)
	wantErr(t, err, dtrain.ErrNotFound, "chat_template")
	_, err = tok.Decode([]int32{512}, true)
	wantErr(t, err, dtrain.ErrInvalidArgument)
}

func containsSpecial(special []dtrain.SpecialToken, id int32, content string) bool {
	for _, s := range special {
		if s.ID == id && s.Content == content {
			return true
		}
	}
	return false
}

func TestApplyChatTemplateEqualsTransformers(t *testing.T) {
	defer guard(t)
	data, err := os.ReadFile(hfChat)
	ok(t, err)
	var fixture struct {
		Conversations map[string][]dtrain.Message `json:"conversations"`
		Cases         []struct {
			Template            string `json:"template"`
			Conversation        string `json:"conversation"`
			AddGenerationPrompt bool   `json:"add_generation_prompt"`
			Expected            string `json:"expected"`
		} `json:"cases"`
	}
	ok(t, json.Unmarshal(data, &fixture))
	if !reflect.DeepEqual(fixture.Conversations["2"], conversation2) {
		t.Fatalf("conversation 2 is %+v", fixture.Conversations["2"])
	}
	tok := must(dtrain.NewTokenizer(filepath.Join(hfTokenizers, "qwen2", "tokenizer.json"), "chatml"))
	defer tok.Close()
	checked := 0
	for _, c := range fixture.Cases {
		if c.Template != "chatml" || c.Conversation != "2" {
			continue
		}
		if got := must(tok.ApplyChatTemplate(conversation2, c.AddGenerationPrompt)); got != c.Expected {
			t.Fatalf("generation prompt %v: %q, transformers %q", c.AddGenerationPrompt, got, c.Expected)
		}
		checked++
	}
	if checked != 2 {
		t.Fatalf("%d chatml cases of conversation 2", checked)
	}
	llama := must(dtrain.NewTokenizer(filepath.Join(hfTokenizers, "llama2", "tokenizer.json"), "llama2"))
	defer llama.Close()
	_, err = llama.ApplyChatTemplate(fixture.Conversations["not_alternating"], true)
	wantErr(t, err, dtrain.ErrInvalidArgument, "alternate")
	_, err = dtrain.NewTokenizer(filepath.Join(hfTokenizers, "qwen2", "tokenizer.json"), "no-such-family")
	wantErr(t, err, dtrain.ErrInvalidArgument, "no-such-family")
}

func TestDetokenizerPiecesMakeTheDecode(t *testing.T) {
	defer guard(t)
	for _, family := range []string{"qwen2", "llama2"} {
		tok := must(dtrain.NewTokenizer(filepath.Join(hfTokenizers, family, "tokenizer.json"), ""))
		ids := must(tok.Encode(unicodeText, true))
		for _, skip := range []bool{true, false} {
			d := must(tok.NewDetokenizer(skip))
			var pieces []string
			for _, id := range ids {
				if piece := must(d.Push(id)); piece != "" {
					pieces = append(pieces, piece)
				}
			}
			pieces = append(pieces, must(d.Finish()))
			if got, want := strings.Join(pieces, ""), must(tok.Decode(ids, skip)); got != want || len(pieces) < 3 {
				t.Fatalf("%s skip=%v: pieces %q make %q, decode %q", family, skip, pieces, got, want)
			}
			_, err := d.Push(ids[0])
			wantErr(t, err, dtrain.ErrInvalidArgument, "finish")
			ok(t, d.Close())
			ok(t, d.Close())
			_, err = d.Push(ids[0])
			wantErr(t, err, dtrain.ErrInvalidArgument, "Detokenizer", "closed")
		}
		// The detokenizer keeps what it needs of a tokenizer closed before it.
		d := must(dtrain.NewDetokenizer(tok, true))
		ok(t, tok.Close())
		if piece := must(d.Push(ids[len(ids)-1])) + must(d.Finish()); piece == "" {
			t.Fatalf("%s: nothing after the tokenizer closed", family)
		}
		ok(t, d.Close())
		_, err := tok.Encode("x", true)
		wantErr(t, err, dtrain.ErrInvalidArgument, "Tokenizer", "closed")
		_, err = tok.NewDetokenizer(true)
		wantErr(t, err, dtrain.ErrInvalidArgument, "Tokenizer", "closed")
	}
}

// A tokenizer is immutable: goroutines share one.
func TestTokenizerFromManyGoroutines(t *testing.T) {
	defer guard(t)
	tok := must(dtrain.NewTokenizer(filepath.Join(hfTokenizers, "qwen2", "tokenizer.json"), ""))
	defer tok.Close()
	want := must(tok.Encode(unicodeText, true))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				got, err := tok.Encode(unicodeText, true)
				if err != nil || !reflect.DeepEqual(got, want) {
					errs <- fmt.Errorf("encode: %v %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestHFMissingDirectoryIsIOError(t *testing.T) {
	defer guard(t)
	missing := filepath.Join(t.TempDir(), "no-such-model")
	_, err := dtrain.NewModelFromHF(missing, nil)
	wantErr(t, err, dtrain.ErrIO, missing)
	_, err = dtrain.InspectHF(missing)
	wantErr(t, err, dtrain.ErrIO, missing)
	_, err = dtrain.NewTokenizer(missing, "")
	wantErr(t, err, dtrain.ErrIO, missing)
	_, err = dtrain.NewModelFromHF(filepath.Join(hfModels, "qwen2"), dtrain.Options{"precision": "f8"})
	wantErr(t, err, dtrain.ErrInvalidArgument, "precision")
	var nilModel *dtrain.Model
	wantErr(t, nilModel.SaveHF(missing, nil), dtrain.ErrInvalidArgument, "Model")
	var nilTok *dtrain.Tokenizer
	_, err = dtrain.NewDetokenizer(nilTok, true)
	wantErr(t, err, dtrain.ErrInvalidArgument, "Tokenizer")
}

// A conversation rendered with a built-in chat template (what a model directory's
// tokenizer_config.json usually supplies), tokenized, and decoded again one id at a time,
// as the tokens of a Stream arrive.
func ExampleTokenizer_ApplyChatTemplate() {
	tok, err := dtrain.NewTokenizer("../../tests/fixtures/hf/tokenizers/qwen2/tokenizer.json", "chatml")
	if err != nil {
		log.Fatal(err)
	}
	defer tok.Close()
	text, err := tok.ApplyChatTemplate([]dtrain.Message{{Role: "user", Content: "2+2?"}}, true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", text)
	ids, err := tok.Encode(text, false) // the template's text carries its special tokens
	if err != nil {
		log.Fatal(err)
	}
	end, _ := tok.TokenToID("<|im_end|>")
	fmt.Println(ids[0], end)

	d, err := tok.NewDetokenizer(false)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	var out strings.Builder
	for _, id := range ids {
		piece, err := d.Push(id)
		if err != nil {
			log.Fatal(err)
		}
		out.WriteString(piece)
	}
	rest, _ := d.Finish()
	out.WriteString(rest)
	fmt.Println(out.String() == text)
	// Output:
	// "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"
	// 510 511
	// true
}

// A model directory: tokenizer.json with tokenizer_config.json (special tokens, chat
// template) and generation_config.json (the end ids).
func TestHFModelDirectoryTokenizer(t *testing.T) {
	defer guard(t)
	llama := must(dtrain.NewTokenizer(filepath.Join(hfModels, "llama"), "llama2"))
	defer llama.Close()
	info := must(llama.Info())
	if info.BOSToken != "<s>" || info.BOSTokenID != 1 || !reflect.DeepEqual(info.EOSTokenIDs, []int32{2}) {
		t.Fatalf("llama: %+v", info)
	}
	// chat_templates.json: transformers' llama2 rendering of conversation "2".
	want := "<s>[INST] Héllo, \"wörld\" — what's 2+2? 😀 [/INST] It's 4.\n\nAnything else? </s>"
	for _, gen := range []bool{true, false} {
		if got := must(llama.ApplyChatTemplate(conversation2, gen)); got != want {
			t.Fatalf("llama2 template: %q, transformers %q", got, want)
		}
	}
	qwen := must(dtrain.NewTokenizer(filepath.Join(hfModels, "qwen2"), ""))
	defer qwen.Close()
	info = must(qwen.Info())
	if !info.ChatTemplate || !reflect.DeepEqual(info.EOSTokenIDs, []int32{511}) {
		t.Fatalf("qwen2: %+v", info)
	}
	text := must(qwen.ApplyChatTemplate(conversation2, true)) // the directory's own template
	if !strings.HasSuffix(text, "<|im_start|>assistant\n") || !strings.Contains(text, conversation2[1].Content) {
		t.Fatalf("qwen2 template: %q", text)
	}
	// Text in, generation, text out: the model and its tokenizer together, stopping at its
	// end ids.
	model := must(dtrain.NewModelFromHF(filepath.Join(hfModels, "qwen2"), nil))
	defer model.Close()
	opt := must(dtrain.NewOptimizer(model, "sgd", nil))
	defer opt.Close()
	engine := must(dtrain.NewEngine(nil, model, opt, nil))
	defer engine.Close()
	ids := must(qwen.Encode(text, false))
	out := must(engine.Generate([][]int32{ids}, dtrain.Options{"max_new_tokens": 6, "stop_tokens": info.EOSTokenIDs}))
	d := must(qwen.NewDetokenizer(true))
	defer d.Close()
	var pieces strings.Builder
	for _, id := range out[0] {
		pieces.WriteString(must(d.Push(id)))
	}
	pieces.WriteString(must(d.Finish()))
	if len(out[0]) == 0 || pieces.String() != must(qwen.Decode(out[0], true)) {
		t.Fatalf("generated %v: pieces %q", out[0], pieces.String())
	}
}
