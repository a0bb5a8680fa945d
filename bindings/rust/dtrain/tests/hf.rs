//! Hugging Face models and tokenizers, held to the fixtures' references: transformers'
//! greedy ids (tests/fixtures/hf/models/NAME/reference.safetensors), the tokenizers
//! library's ids (tokenizers/FAMILY/cases.json) and transformers' chat template output
//! (chat_templates.json), copied here.
mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::scratch;
use dtrain::{hf_inspect_json, Detokenizer, Engine, Message, Model, Optimizer, Status, Tokenizer};

const UNICODE: &str = "Héllo, \"wörld\" — what's 2+2? 😀 日本語 naïve\n\tcafé";

// reference.safetensors: prompt_ids and transformers' greedy_ids.
const QWEN2_PROMPT: [i32; 12] = [21, 146, 184, 497, 457, 233, 334, 185, 237, 186, 176, 152];
const QWEN2_GREEDY: [i32; 8] = [48, 48, 48, 48, 48, 48, 48, 48];
const LLAMA_PROMPT: [i32; 12] = [437, 381, 26, 180, 288, 267, 394, 470, 306, 192, 5, 361];
const LLAMA_GREEDY: [i32; 8] = [442, 413, 172, 413, 410, 413, 410, 413];

// chat_templates.json: what transformers renders for conversation "2" with "chatml".
const CHATML_2: &str = "<|im_start|>user\nHéllo, \"wörld\" — what's 2+2? 😀<|im_end|>\n\
                        <|im_start|>assistant\n  It's 4.\n\nAnything else?  <|im_end|>\n";
const GENERATION_PROMPT: &str = "<|im_start|>assistant\n";

fn conversation() -> Vec<Message> {
    vec![
        Message::user("Héllo, \"wörld\" — what's 2+2? 😀"),
        Message::assistant("  It's 4.\n\nAnything else?  "),
    ]
}

fn hf() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/hf")
}

fn model_dir(name: &str) -> PathBuf {
    hf().join("models").join(name)
}

fn tokenizer_json(family: &str) -> PathBuf {
    hf().join("tokenizers").join(family).join("tokenizer.json")
}

/// An integer field of a JSON report (the library writes them compactly).
fn json_int(json: &str, key: &str) -> i64 {
    let at = json
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("{key} in {json}"));
    let rest = &json[at + key.len() + 3..];
    let end = rest
        .find(|c: char| c != '-' && !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().unwrap()
}

fn greedy(model: &Model, prompt: &[i32], n: usize) -> Vec<i32> {
    let opt = Optimizer::new(model, "sgd", &[("lr", 0.0.into())]).unwrap();
    let mut engine = Engine::new(None, model, &opt, &[]).unwrap();
    engine
        .generate(&[prompt], &[("max_new_tokens", n.into())])
        .unwrap()
        .remove(0)
}

#[test]
fn from_hf_generates_the_reference_greedy_ids() {
    for (name, arch, prompt, want) in [
        ("qwen2", "Qwen2ForCausalLM", QWEN2_PROMPT, QWEN2_GREEDY),
        ("llama", "LlamaForCausalLM", LLAMA_PROMPT, LLAMA_GREEDY),
    ] {
        let info = hf_inspect_json(model_dir(name)).unwrap();
        assert!(info.contains(&format!("\"{arch}\"")), "{info}");
        let model = Model::from_hf(model_dir(name), &[]).unwrap();
        assert_eq!(
            model.param_count().unwrap() as i64,
            json_int(&info, "parameters")
        );
        assert_eq!(greedy(&model, &prompt, want.len()), want, "{name}");
    }
    let short = Model::from_hf(
        model_dir("qwen2"),
        &[("precision", "f32".into()), ("context", 32.into())],
    )
    .unwrap();
    assert!(short.param_count().unwrap() > 0);
}

#[test]
fn save_hf_round_trip() {
    let dir = scratch("hf_save");
    let module = dir.join("module");
    let from_engine = dir.join("engine");
    let model = Model::from_hf(model_dir("qwen2"), &[]).unwrap();
    let count = model.param_count().unwrap();
    let tokenizers = hf().join("tokenizers").join("qwen2");
    model
        .save_hf(
            &module,
            &[
                ("tokenizer_from", tokenizers.to_str().unwrap().into()),
                ("eos_token_ids", vec![7, 9].into()),
            ],
        )
        .unwrap();
    {
        let opt = Optimizer::new(&model, "sgd", &[]).unwrap();
        let mut engine = Engine::new(None, &model, &opt, &[]).unwrap();
        engine
            .save_hf(&from_engine, &[("precision", "bf16".into())])
            .unwrap();
    }
    assert!(module.join("tokenizer.json").is_file());
    let info = hf_inspect_json(&module).unwrap();
    assert!(info.contains("\"eos_token_ids\":[7,9]"), "{info}");
    let info = hf_inspect_json(&from_engine).unwrap();
    assert!(info.contains("\"stored_dtype\":\"bf16\""), "{info}");

    let again = Model::from_hf(&module, &[]).unwrap();
    assert_eq!(again.param_count().unwrap(), count);
    assert_eq!(greedy(&again, &QWEN2_PROMPT, 8), QWEN2_GREEDY);
    let bf16 = Model::from_hf(&from_engine, &[("precision", "stored".into())]).unwrap();
    assert_eq!(bf16.param_count().unwrap(), count);
    let copied = Tokenizer::new(&module, None).unwrap();
    let original = Tokenizer::new(tokenizer_json("qwen2"), None).unwrap();
    assert_eq!(
        copied.encode(UNICODE, true).unwrap(),
        original.encode(UNICODE, true).unwrap()
    );
}

#[test]
fn stop_tokens_end_the_generation() {
    let model = Model::from_hf(model_dir("llama"), &[]).unwrap();
    let opt = Optimizer::new(&model, "sgd", &[]).unwrap();
    let mut engine = Engine::new(None, &model, &opt, &[]).unwrap();
    let want = LLAMA_GREEDY[..3].to_vec();
    for stop in [
        [LLAMA_GREEDY[2], 0].into(),
        LLAMA_GREEDY[2].to_string().into(),
    ] {
        let got = engine
            .generate(
                &[LLAMA_PROMPT],
                &[("max_new_tokens", 8.into()), ("stop_tokens", stop)],
            )
            .unwrap();
        assert_eq!(got[0], want);
    }
}

#[test]
fn tokenizer_round_trip_and_the_tokenizers_librarys_ids() {
    // cases.json's "❤️✨😀": ids, ids with special tokens, and their decoding.
    let cases: [(&str, &[i32], &[i32], &str); 2] = [
        (
            "qwen2",
            &[158, 251, 97, 171, 116, 237, 158, 250, 101, 371],
            &[158, 251, 97, 171, 116, 237, 158, 250, 101, 371],
            "❤️✨😀",
        ),
        (
            "llama2",
            &[
                328, 229, 160, 167, 242, 187, 146, 229, 159, 171, 243, 162, 155, 131,
            ],
            &[
                1, 328, 229, 160, 167, 242, 187, 146, 229, 159, 171, 243, 162, 155, 131,
            ],
            "<s> ❤️✨😀",
        ),
    ];
    for (family, ids, ids_special, decoded) in cases {
        let tok = Tokenizer::new(tokenizer_json(family), None).unwrap();
        let all = tok.encode(UNICODE, true).unwrap();
        assert!(all.len() > 10);
        assert_eq!(tok.decode(&all, true).unwrap(), UNICODE);
        assert_eq!(tok.encode_bytes(UNICODE.as_bytes(), true).unwrap(), all);
        assert_eq!(tok.vocab_size().unwrap(), 512);
        assert_eq!(tok.encode("❤️✨😀", false).unwrap(), ids, "{family}");
        assert_eq!(tok.encode("❤️✨😀", true).unwrap(), ids_special, "{family}");
        assert_eq!(tok.decode(ids_special, false).unwrap(), decoded);
        assert_eq!(tok.decode(ids_special, true).unwrap(), "❤️✨😀");
        assert_eq!(tok.decode(&[], true).unwrap(), "");
    }
}

#[test]
fn special_tokens_info_and_errors() {
    let tok = Tokenizer::new(tokenizer_json("llama2"), None).unwrap();
    let bos = tok.token_to_id("<s>").unwrap();
    assert_eq!(tok.encode("hi", true).unwrap()[0], bos);
    let info = tok.info_json().unwrap();
    assert!(info.contains("\"chat_template\":false"), "{info}");
    assert!(info.contains("\"<s>\""), "{info}");
    let err = tok.token_to_id("no-such-token").unwrap_err();
    assert_eq!(err.status, Status::NOT_FOUND);
    assert!(err.message.contains("no-such-token"), "{err}");
    let err = tok.apply_chat_template(&conversation(), true).unwrap_err();
    assert_eq!(err.status, Status::NOT_FOUND);
    assert!(err.message.contains("chat_template"), "{err}");
    for bad in [512, -1, i32::MAX, i32::MIN] {
        assert_eq!(
            tok.decode(&[bad], true).unwrap_err().status,
            Status::INVALID_ARGUMENT
        );
    }
    assert_eq!(
        tok.token_to_id("a\0b").unwrap_err().status,
        Status::INVALID_ARGUMENT
    );
    // A NUL inside text is text.
    let ids = tok.encode("a\0b", false).unwrap();
    assert_eq!(tok.decode(&ids, true).unwrap(), "a\0b");
}

#[test]
fn apply_chat_template_equals_transformers() {
    let tok = Tokenizer::new(tokenizer_json("qwen2"), Some("chatml")).unwrap();
    let conv = conversation();
    assert_eq!(
        tok.apply_chat_template(&conv, true).unwrap(),
        format!("{CHATML_2}{GENERATION_PROMPT}")
    );
    assert_eq!(tok.apply_chat_template(&conv, false).unwrap(), CHATML_2);
    assert!(tok.info_json().unwrap().contains("\"chat_template\":true"));
    // Quotes, backslashes and control characters cross as JSON.
    let odd = "a \"q\" \\ \u{1}\t z";
    assert_eq!(
        tok.apply_chat_template(&[Message::user(odd)], false)
            .unwrap(),
        format!("<|im_start|>user\n{odd}<|im_end|>\n")
    );
    let llama = Tokenizer::new(tokenizer_json("llama2"), Some("llama2")).unwrap();
    let err = llama
        .apply_chat_template(&[Message::user("a"), Message::user("b")], true)
        .unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(err.message.contains("alternate"), "{err}");
    let err = Tokenizer::new(tokenizer_json("qwen2"), Some("no-such-family")).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
}

/// A model directory: tokenizer.json with tokenizer_config.json (special tokens, chat
/// template) and generation_config.json (the end ids).
#[test]
fn a_model_directorys_tokenizer() {
    let llama = Tokenizer::new(model_dir("llama"), Some("llama2")).unwrap();
    let info = llama.info_json().unwrap();
    assert_eq!(json_int(&info, "bos_token_id"), 1);
    assert!(info.contains("\"eos_token_ids\":[2]"), "{info}");
    // chat_templates.json: transformers' llama2 rendering of conversation "2".
    let want = "<s>[INST] Héllo, \"wörld\" — what's 2+2? 😀 [/INST] It's 4.\n\nAnything else? </s>";
    for gen in [true, false] {
        assert_eq!(
            llama.apply_chat_template(&conversation(), gen).unwrap(),
            want
        );
    }
    let qwen = Tokenizer::new(model_dir("qwen2"), None).unwrap();
    let info = qwen.info_json().unwrap();
    assert!(info.contains("\"eos_token_ids\":[511]"), "{info}");
    let text = qwen.apply_chat_template(&conversation(), true).unwrap(); // its own template
    assert!(text.ends_with(GENERATION_PROMPT), "{text}");
    // Text in, generation, text out: the model and its tokenizer together.
    let model = Model::from_hf(model_dir("qwen2"), &[]).unwrap();
    let opt = Optimizer::new(&model, "sgd", &[]).unwrap();
    let mut engine = Engine::new(None, &model, &opt, &[]).unwrap();
    let ids = qwen.encode(&text, false).unwrap();
    let out = engine
        .generate(
            &[ids],
            &[("max_new_tokens", 6.into()), ("stop_tokens", [511].into())],
        )
        .unwrap()
        .remove(0);
    let mut d = qwen.detokenizer(true).unwrap();
    let mut pieces = String::new();
    for &id in &out {
        pieces += &d.push(id).unwrap();
    }
    pieces += &d.finish().unwrap();
    assert!(!out.is_empty());
    assert_eq!(pieces, qwen.decode(&out, true).unwrap());
}

#[test]
fn detokenizer_pieces_concatenate_to_decode() {
    for family in ["qwen2", "llama2"] {
        let mut tok = Tokenizer::new(tokenizer_json(family), None).unwrap();
        let ids = tok.encode(UNICODE, true).unwrap();
        for skip in [true, false] {
            let mut d = tok.detokenizer(skip).unwrap();
            let mut pieces: Vec<String> = Vec::new();
            for &id in &ids {
                let piece = d.push(id).unwrap();
                if !piece.is_empty() {
                    pieces.push(piece);
                }
            }
            pieces.push(d.finish().unwrap());
            assert!(pieces.len() > 2, "{pieces:?}");
            assert_eq!(pieces.concat(), tok.decode(&ids, skip).unwrap());
            let err = d.push(ids[0]).unwrap_err();
            assert!(err.message.contains("finish"), "{err}");
        }
        // The detokenizer keeps what it needs of a tokenizer closed first.
        let mut d = Detokenizer::new(&tok, true).unwrap();
        tok.close();
        tok.close();
        assert_eq!(
            tok.encode("x", true).unwrap_err().status,
            Status::INVALID_ARGUMENT
        );
        assert!(Detokenizer::new(&tok, true).is_err());
        let text = d.push(ids[1]).unwrap() + &d.finish().unwrap();
        assert!(!text.is_empty());
        assert_eq!(d.push(-1).unwrap_err().status, Status::INVALID_ARGUMENT);
        d.close();
        assert_eq!(d.push(1).unwrap_err().status, Status::INVALID_ARGUMENT);
    }
}

#[test]
fn one_tokenizer_many_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Tokenizer>();
    let tok = Arc::new(Tokenizer::new(tokenizer_json("qwen2"), None).unwrap());
    let want = tok.encode(UNICODE, true).unwrap();
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let tok = Arc::clone(&tok);
            let want = want.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    assert_eq!(tok.encode(UNICODE, true).unwrap(), want);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
}

#[test]
fn missing_directory_is_io_naming_the_path() {
    let missing = scratch("hf_missing").join("no-such-model");
    let shown = missing.to_str().unwrap().to_string();
    for err in [
        Model::from_hf(&missing, &[]).unwrap_err(),
        hf_inspect_json(&missing).unwrap_err(),
        Tokenizer::new(&missing, None).unwrap_err(),
    ] {
        assert_eq!(err.status, Status::IO);
        assert!(err.message.contains(&shown), "{err}");
    }
    let err = Model::from_hf(model_dir("qwen2"), &[("precision", "f8".into())]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert_eq!(
        Model::from_hf("a\0b", &[]).unwrap_err().status,
        Status::INVALID_ARGUMENT
    );
}
