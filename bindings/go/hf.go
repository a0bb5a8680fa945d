package dtrain

import (
	"encoding/json"
	"runtime"

	"dtrain.dev/dtrain/internal/cdt"
)

// This file holds the Hugging Face side of the binding: model directories in and out
// (NewModelFromHF, Model.SaveHF, Engine.SaveHF, InspectHF) and tokenizers (Tokenizer,
// Detokenizer).

// NewModelFromHF creates a GPT from a Hugging Face model directory (config.json and
// model.safetensors or its shards; GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM or
// MistralForCausalLM) with its weights. opts: nil or "precision" ("f32", the default,
// "bf16", "f16", or "stored": the files' dtype) and "context" (the longest sequence; the
// default is the model's max_position_embeddings). A missing or malformed file is an
// ErrIO naming it; an unsupported architecture or setting an ErrInvalidArgument naming it.
func NewModelFromHF(dir string, opts Options) (*Model, error) {
	return create[Model](opts, func(o cdt.Options, p *cdt.Module) cdt.Status {
		return cdt.Dt_module_create_from_hf(dir, o, p)
	}, cdt.Dt_module_destroy)
}

// SaveHF writes the model (a GPT) as a Hugging Face directory that transformers loads:
// config.json, generation_config.json and model.safetensors (or shards and an index past
// "max_shard_bytes"); dir is created if missing. opts: nil or "precision" ("f32", "bf16",
// "f16"; default: the model's), "architecture", "tokenizer_from" (a directory whose
// tokenizer files are copied over), "bos_token_id", "eos_token_id", "eos_token_ids" (ids,
// as a []int32 or a string "1,2"), "max_shard_bytes". After training through an Engine,
// use Engine.SaveHF, which gathers the weights first.
func (m *Model) SaveHF(dir string, opts Options) error {
	return withOptions(opts, func(o cdt.Options) error {
		return invoke(m, func(h cdt.Module) cdt.Status { return cdt.Dt_module_save_hf(h, dir, o) })
	})
}

// SaveHF writes what Model.SaveHF writes from the engine's current weights, gathered
// first under tp, pp, dp or ZeRO (collective: under mpirun every process calls it, and
// rank 0 writes). The same opts.
func (e *Engine) SaveHF(dir string, opts Options) error {
	return withOptions(opts, func(o cdt.Options) error {
		return invoke(e, func(h cdt.Engine) cdt.Status { return cdt.Dt_engine_save_hf(h, dir, o) })
	})
}

// withOptions runs call with opts as a dt_options, released after it.
func withOptions(opts Options, call func(cdt.Options) error) error {
	o, free, err := newOptions(opts)
	if err != nil {
		return err
	}
	defer free()
	return call(o)
}

// HFInfo describes a Hugging Face model directory (InspectHF).
type HFInfo struct {
	Architecture          string         `json:"architecture"`  // e.g. "Qwen2ForCausalLM"
	Config                map[string]any `json:"config"`        // NewGPT's keys
	Parameters            int64          `json:"parameters"`    // what ParamCount will say
	StoredDType           string         `json:"stored_dtype"`  // "f32", "bf16", "f16"
	WeightBytes           int64          `json:"weight_bytes"`  // as stored
	Files                 []string       `json:"files"`         // the weight files
	BOSTokenID            int32          `json:"bos_token_id"`  // -1: none
	EOSTokenIDs           []int32        `json:"eos_token_ids"` // what ends a generation
	MaxPositionEmbeddings int64          `json:"max_position_embeddings"`
}

// InspectHF describes a Hugging Face model directory without loading its weights. Errors
// as NewModelFromHF (an ErrIO naming the path for a missing directory).
func InspectHF(dir string) (*HFInfo, error) {
	text, err := InspectHFJSON(dir)
	if err != nil {
		return nil, err
	}
	info := &HFInfo{}
	if err := json.Unmarshal([]byte(text), info); err != nil {
		return nil, &Error{Status: StatusInternal, Message: "dtrain: dt_hf_inspect_json's JSON: " + err.Error()}
	}
	return info, nil
}

// InspectHFJSON is InspectHF's description as the library writes it (JSON).
func InspectHFJSON(dir string) (string, error) {
	return readJSON(func(buf []byte, needed *int64) cdt.Status {
		return cdt.Dt_hf_inspect_json(dir, buf, needed)
	})
}

// Tokenizer is a Hugging Face tokenizer (dt_tokenizer): tokenizer.json (byte-level BPE or
// SentencePiece-style BPE with byte fallback), with the model's chat template and
// end-of-sequence ids. It is immutable, so unlike the other handles any number of
// goroutines may use one at once (but not while one of them closes it).
type Tokenizer struct{ obj *owned[cdt.Tokenizer] }

// NewTokenizer loads a tokenizer from path: a model directory (its tokenizer.json, and if
// present tokenizer_config.json and generation_config.json) or a tokenizer.json file.
// chatTemplate: "" for the directory's own chat template, or a built-in family to use
// instead ("chatml", "llama3", "llama2", "mistral", "zephyr"). What the library does not
// implement exactly is refused by name (ErrInvalidArgument); a malformed file is an ErrIO.
func NewTokenizer(path, chatTemplate string) (*Tokenizer, error) {
	var opts Options
	if chatTemplate != "" {
		opts = Options{"chat_template": chatTemplate}
	}
	return create[Tokenizer](opts, func(o cdt.Options, p *cdt.Tokenizer) cdt.Status {
		return cdt.Dt_tokenizer_create(path, o, p)
	}, cdt.Dt_tokenizer_destroy)
}

// Close releases the tokenizer; its detokenizers keep what they need. Idempotent.
func (t *Tokenizer) Close() error { return closeHandle(t) }

// Encode returns the token ids of text (UTF-8; invalid sequences read as U+FFFD).
// addSpecialTokens: the post-processor's tokens too (Llama's BOS), as transformers does.
func (t *Tokenizer) Encode(text string, addSpecialTokens bool) ([]int32, error) {
	h, err := handleOf(t)
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(t)
	special := boolArg(addSpecialTokens)
	ids := make([]int32, len(text)+8) // a byte-level BPE makes at most one id per byte
	for {
		var n int64
		if err := check(cdt.Dt_tokenizer_encode(h, text, special, &ids[0], int64(len(ids)), &n)); err != nil {
			return nil, err
		}
		if n <= int64(len(ids)) {
			return ids[:n:n], nil
		}
		ids = make([]int32, n) // more than the guess: once more at the exact count
	}
}

// Decode returns the text of ids; skipSpecialTokens leaves special tokens out. An id
// outside the vocabulary is an ErrInvalidArgument.
func (t *Tokenizer) Decode(ids []int32, skipSpecialTokens bool) (string, error) {
	h, err := handleOf(t)
	if err != nil {
		return "", err
	}
	defer runtime.KeepAlive(t)
	var first *int32
	if len(ids) > 0 {
		first = &ids[0]
	}
	skip := boolArg(skipSpecialTokens)
	text, err := readJSON(func(buf []byte, needed *int64) cdt.Status {
		return cdt.Dt_tokenizer_decode(h, first, int64(len(ids)), skip, buf, needed)
	})
	runtime.KeepAlive(ids)
	return text, err
}

// VocabSize returns the vocabulary's size, the largest id + 1 (0 for a closed tokenizer).
func (t *Tokenizer) VocabSize() int { return int(peek(t, cdt.Dt_tokenizer_vocab_size)) }

// TokenToID returns the id of a token's text, such as "<|im_end|>" (ErrNotFound if none).
func (t *Tokenizer) TokenToID(token string) (int32, error) {
	return query(t, func(h cdt.Tokenizer, out *int32) cdt.Status {
		return cdt.Dt_tokenizer_token_to_id(h, token, out)
	})
}

// SpecialToken is one special token of a tokenizer.
type SpecialToken struct {
	ID      int32  `json:"id"`
	Content string `json:"content"`
}

// TokenizerInfo is what Tokenizer.Info returns: the special tokens.
type TokenizerInfo struct {
	BOSToken     string         `json:"bos_token"`     // "" when tokenizer_config.json has none
	EOSToken     string         `json:"eos_token"`     // "" when tokenizer_config.json has none
	BOSTokenID   int32          `json:"bos_token_id"`  // -1: none
	EOSTokenIDs  []int32        `json:"eos_token_ids"` // what generation stops at ("stop_tokens")
	VocabSize    int64          `json:"vocab_size"`
	Special      []SpecialToken `json:"special"`
	ChatTemplate bool           `json:"chat_template"` // whether ApplyChatTemplate has a template
}

// Info returns the special tokens: EOSTokenIDs are generation_config.json's end ids, else
// the tokenizer_config's eos token (pass them to Generate as "stop_tokens").
func (t *Tokenizer) Info() (*TokenizerInfo, error) {
	text, err := t.InfoJSON()
	if err != nil {
		return nil, err
	}
	info := &TokenizerInfo{}
	if err := json.Unmarshal([]byte(text), info); err != nil {
		return nil, &Error{Status: StatusInternal, Message: "dtrain: dt_tokenizer_info_json's JSON: " + err.Error()}
	}
	return info, nil
}

// InfoJSON is Info as the library writes it (JSON).
func (t *Tokenizer) InfoJSON() (string, error) {
	return reportJSON(t, cdt.Dt_tokenizer_info_json)
}

// Message is one turn of a conversation: Role "system", "user" or "assistant".
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ApplyChatTemplate renders a conversation with the tokenizer's chat template, byte for byte
// as transformers' apply_chat_template(messages, tokenize=False, add_generation_prompt=...).
// A template that raises (roles that do not alternate, ...) is an ErrInvalidArgument with
// its message; a tokenizer without a template an ErrNotFound (see NewTokenizer's
// chatTemplate). Encode the text with addSpecialTokens false: its special tokens are in it.
func (t *Tokenizer) ApplyChatTemplate(messages []Message, addGenerationPrompt bool) (string, error) {
	if messages == nil {
		messages = []Message{} // "[]", not "null"
	}
	doc, err := json.Marshal(messages)
	if err != nil {
		return "", invalid("messages: %v", err)
	}
	text := string(doc)
	gen := boolArg(addGenerationPrompt)
	return reportJSON(t, func(h cdt.Tokenizer, buf []byte, needed *int64) cdt.Status {
		return cdt.Dt_tokenizer_apply_chat_template(h, text, gen, buf, needed)
	})
}

// Detokenizer decodes a stream of ids (dt_detokenizer): Push takes one id at a time and
// returns the text that became final (never half a UTF-8 character; a SentencePiece
// leading space handled as a whole Decode handles it), Finish the rest, so the pieces
// concatenate to Decode of all the ids. One goroutine at a time.
type Detokenizer struct{ obj *owned[cdt.Detokenizer] }

// NewDetokenizer starts a streaming decode with tokenizer (which it keeps alive: the
// tokenizer may be closed first). skipSpecialTokens as for Decode.
func NewDetokenizer(tokenizer *Tokenizer, skipSpecialTokens bool) (*Detokenizer, error) {
	d, err := query(tokenizer, func(h cdt.Tokenizer, out *cdt.Detokenizer) cdt.Status {
		return cdt.Dt_detokenizer_create(h, boolArg(skipSpecialTokens), out)
	})
	if err != nil {
		return nil, err
	}
	return wrap[Detokenizer](d, cdt.Dt_detokenizer_destroy), nil
}

// NewDetokenizer is NewDetokenizer(t, skipSpecialTokens).
func (t *Tokenizer) NewDetokenizer(skipSpecialTokens bool) (*Detokenizer, error) {
	return NewDetokenizer(t, skipSpecialTokens)
}

// Close releases the detokenizer. Idempotent.
func (d *Detokenizer) Close() error { return closeHandle(d) }

// Push adds one id and returns the text it made final ("" while it waits for more).
func (d *Detokenizer) Push(id int32) (string, error) {
	if err := invoke(d, func(h cdt.Detokenizer) cdt.Status { return cdt.Dt_detokenizer_push(h, id) }); err != nil {
		return "", err
	}
	return d.Text()
}

// Finish ends the stream and returns what was held back (an incomplete UTF-8 tail as
// U+FFFD). A later Push is an ErrInvalidArgument.
func (d *Detokenizer) Finish() (string, error) {
	if err := invoke(d, cdt.Dt_detokenizer_finish); err != nil {
		return "", err
	}
	return d.Text()
}

// Text returns the final text not yet returned (Push and Finish return it already).
func (d *Detokenizer) Text() (string, error) {
	return reportJSON(d, cdt.Dt_detokenizer_text)
}
