//! Hugging Face model directories in and out ([`Model::from_hf`], [`Model::save_hf`],
//! [`crate::Engine::save_hf`], [`hf_inspect_json`]) and tokenizers ([`Tokenizer`],
//! [`Detokenizer`], [`Message`]).
use std::os::raw::c_char;
use std::path::Path;
use std::ptr;

use dtrain_sys as sys;

use crate::error::{check, Error, Result, Status};
use crate::handle::{handle, lock, Family};
use crate::model::Model;
use crate::options::{cstring, CallOptions, Pairs};
use crate::{path_cstring, read_json, to_usize, try_filled};

/// [`read_json`] for text that may hold any character, U+0000 included: the text is the
/// `needed - 1` bytes the call reports, not what comes before a first NUL.
fn read_text(
    mut f: impl FnMut(*mut c_char, usize, *mut usize) -> sys::dt_status,
) -> Result<String> {
    let mut needed = 0usize;
    check(f(ptr::null_mut(), 0, &mut needed))?;
    loop {
        let mut buf: Vec<u8> = try_filled(needed.max(1), 0, "the text")?;
        let cap = buf.len();
        check(f(buf.as_mut_ptr() as *mut c_char, cap, &mut needed))?;
        if needed <= cap {
            buf.truncate(needed.saturating_sub(1));
            return Ok(match String::from_utf8(buf) {
                Ok(s) => s,
                Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
            });
        }
    }
}

impl Model {
    /// A GPT from a Hugging Face model directory (`config.json` and `model.safetensors` or
    /// its shards: GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM),
    /// with its weights. Options: "precision" ("f32", the default, "bf16", "f16", or
    /// "stored": the files' dtype), "context" (the longest sequence; default the model's
    /// max_position_embeddings). A missing or malformed file is `Status::IO` naming it; an
    /// unsupported architecture or setting `Status::INVALID_ARGUMENT` naming it.
    pub fn from_hf(dir: impl AsRef<Path>, options: &Pairs) -> Result<Model> {
        let d = path_cstring(dir.as_ref())?;
        let opts = CallOptions::new(options)?;
        let mut out: *mut sys::dt_module = ptr::null_mut();
        // SAFETY: valid string, options (or NULL) and out-pointer.
        check(unsafe { sys::dt_module_create_from_hf(d.as_ptr(), opts.ptr(), &mut out) })?;
        if out.is_null() {
            return Err(Error::new(
                Status::INTERNAL,
                "dtrain: a create call returned NULL",
            ));
        }
        Ok(Model::from_raw(out, Family::new()))
    }

    /// Writes this GPT as a Hugging Face directory that transformers loads (`config.json`,
    /// `generation_config.json`, `model.safetensors` or shards), created if missing.
    /// Options: "precision" ("f32", "bf16", "f16"; default: the model's), "architecture",
    /// "tokenizer_from" (a directory whose tokenizer files are copied over), "bos_token_id",
    /// "eos_token_id", "eos_token_ids" (`vec![1, 2].into()` or "1,2"), "max_shard_bytes".
    /// After training through an engine, use [`crate::Engine::save_hf`], which gathers the
    /// weights first.
    pub fn save_hf(&self, dir: impl AsRef<Path>, options: &Pairs) -> Result<()> {
        let p = self.raw()?;
        let d = path_cstring(dir.as_ref())?;
        let opts = CallOptions::new(options)?;
        let _g = lock(&[self.family()]);
        // SAFETY: live handle under its family lock, valid string and options.
        check(unsafe { sys::dt_module_save_hf(p, d.as_ptr(), opts.ptr()) })
    }
}

/// A Hugging Face model directory described without loading its weights, as JSON:
/// `{"architecture":..,"config":{..},"parameters":..,"stored_dtype":"bf16",
/// "weight_bytes":..,"files":[..],"bos_token_id":..,"eos_token_ids":[..],
/// "max_position_embeddings":..}`. Errors as [`Model::from_hf`].
pub fn hf_inspect_json(dir: impl AsRef<Path>) -> Result<String> {
    let d = path_cstring(dir.as_ref())?;
    // SAFETY: valid string; read_json passes a buffer of `cap` bytes.
    read_json(|buf, cap, needed| unsafe { sys::dt_hf_inspect_json(d.as_ptr(), buf, cap, needed) })
}

/// One turn of a conversation for [`Tokenizer::apply_chat_template`]: a role ("system",
/// "user" or "assistant") and its content.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }

    pub fn system(content: impl Into<String>) -> Message {
        Message::new("system", content)
    }

    pub fn user(content: impl Into<String>) -> Message {
        Message::new("user", content)
    }

    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new("assistant", content)
    }
}

/// `s` as a JSON string: quotes, backslashes and control characters escaped.
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The messages as the C call reads them: `[{"role":..,"content":..},..]`.
pub(crate) fn messages_json(messages: &[Message]) -> String {
    let mut out = String::from("[");
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"role\":");
        push_json_string(&mut out, &m.role);
        out.push_str(",\"content\":");
        push_json_string(&mut out, &m.content);
        out.push('}');
    }
    out.push(']');
    out
}

/// A Hugging Face tokenizer (`dt_tokenizer`): `tokenizer.json` (byte-level BPE, or
/// SentencePiece-style BPE with byte fallback), with the model's chat template
/// (`tokenizer_config.json`) and end-of-sequence ids (`generation_config.json`).
///
/// Immutable once made, so unlike the other handles it is `Sync` as well as `Send`: share
/// one between threads (`Arc<Tokenizer>`, or scoped threads over `&Tokenizer`).
///
/// ```no_run
/// # fn main() -> dtrain::Result<()> {
/// use dtrain::{Message, Tokenizer};
/// let tok = Tokenizer::new("models/qwen2", None)?;
/// let prompt = tok.apply_chat_template(&[Message::user("Hi!")], true)?;
/// let ids = tok.encode(&prompt, false)?; // the template's text carries its special tokens
/// let mut text = tok.detokenizer(true)?;
/// for id in ids {
///     print!("{}", text.push(id)?);       // text as soon as it is final
/// }
/// println!("{}", text.finish()?);
/// # Ok(()) }
/// ```
pub struct Tokenizer {
    ptr: *mut sys::dt_tokenizer,
}

// SAFETY: the header makes a dt_tokenizer immutable once created, usable by distinct
// threads at once; every method takes &self, and only close (&mut self) or drop release it.
unsafe impl Send for Tokenizer {}
unsafe impl Sync for Tokenizer {}

impl Tokenizer {
    /// Loads the tokenizer at `path`: a model directory (its `tokenizer.json`, and if
    /// present `tokenizer_config.json` and `generation_config.json`) or a `tokenizer.json`
    /// file. `chat_template`: `None` for the file's own, or a built-in family to use
    /// instead ("chatml", "llama3", "llama2", "mistral", "zephyr"). What the library does
    /// not implement exactly is refused by name (`Status::INVALID_ARGUMENT`); a missing or
    /// malformed file is `Status::IO`.
    pub fn new(path: impl AsRef<Path>, chat_template: Option<&str>) -> Result<Tokenizer> {
        let p = path_cstring(path.as_ref())?;
        let opts = match chat_template {
            Some(family) => CallOptions::new(&[("chat_template", family.into())])?,
            None => CallOptions::new(&[])?,
        };
        let mut out: *mut sys::dt_tokenizer = ptr::null_mut();
        // SAFETY: valid string, options (or NULL) and out-pointer.
        check(unsafe { sys::dt_tokenizer_create(p.as_ptr(), opts.ptr(), &mut out) })?;
        if out.is_null() {
            return Err(Error::new(
                Status::INTERNAL,
                "dtrain: a create call returned NULL",
            ));
        }
        Ok(Tokenizer { ptr: out })
    }

    /// Releases the tokenizer now (its detokenizers keep what they need). Idempotent;
    /// dropping does the same. Later calls fail with `Status::INVALID_ARGUMENT`.
    pub fn close(&mut self) {
        let p = std::mem::replace(&mut self.ptr, ptr::null_mut());
        if !p.is_null() {
            // SAFETY: owned, released exactly once; &mut self: no call is in flight.
            unsafe { sys::dt_tokenizer_destroy(p) }
        }
    }

    /// Whether [`close`](Self::close) has run.
    pub fn is_closed(&self) -> bool {
        self.ptr.is_null()
    }

    /// The raw C handle (NULL once closed); it stays owned by `self`.
    pub fn as_raw(&self) -> *mut sys::dt_tokenizer {
        self.ptr
    }

    fn raw(&self) -> Result<*mut sys::dt_tokenizer> {
        if self.ptr.is_null() {
            Err(Error::closed("Tokenizer"))
        } else {
            Ok(self.ptr)
        }
    }

    /// The token ids of `text`. `add_special_tokens`: the post-processor's tokens too
    /// (Llama's BOS), as transformers' encode does.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<i32>> {
        self.encode_bytes(text.as_bytes(), add_special_tokens)
    }

    /// [`Tokenizer::encode`] of UTF-8 bytes; invalid sequences read as U+FFFD.
    pub fn encode_bytes(&self, text: &[u8], add_special_tokens: bool) -> Result<Vec<i32>> {
        let p = self.raw()?;
        // A byte-level BPE makes at most one id per byte; else a second call at the count.
        let guess = text
            .len()
            .checked_add(8)
            .ok_or_else(|| Error::invalid("dtrain: encode: the text is too long"))?;
        let mut ids: Vec<i32> = try_filled(guess, 0, "the token ids")?;
        loop {
            let mut n = 0usize;
            // SAFETY: live handle; `text` holds text.len() bytes and `ids` ids.len() ids.
            check(unsafe {
                sys::dt_tokenizer_encode(
                    p,
                    text.as_ptr() as *const c_char,
                    text.len(),
                    i32::from(add_special_tokens),
                    ids.as_mut_ptr(),
                    ids.len(),
                    &mut n,
                )
            })?;
            if n <= ids.len() {
                ids.truncate(n);
                return Ok(ids);
            }
            ids = try_filled(n, 0, "the token ids")?;
        }
    }

    /// The text of `ids`; `skip_special_tokens` leaves special tokens out. An id outside
    /// the vocabulary is `Status::INVALID_ARGUMENT`.
    pub fn decode(&self, ids: &[i32], skip_special_tokens: bool) -> Result<String> {
        let p = self.raw()?;
        let skip = i32::from(skip_special_tokens);
        // SAFETY: live handle; `ids` holds ids.len() ids; read_json passes `cap` bytes.
        read_text(|buf, cap, needed| unsafe {
            sys::dt_tokenizer_decode(p, ids.as_ptr(), ids.len(), skip, buf, cap, needed)
        })
    }

    /// The vocabulary's size: the largest id + 1.
    pub fn vocab_size(&self) -> Result<usize> {
        let p = self.raw()?;
        let mut n = 0i64;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::dt_tokenizer_vocab_size(p, &mut n) })?;
        to_usize(n, "vocabulary size")
    }

    /// The id of a token's text (e.g. "<|im_end|>"); `Status::NOT_FOUND` if it has none.
    pub fn token_to_id(&self, token: &str) -> Result<i32> {
        let p = self.raw()?;
        let t = cstring(token, "token")?;
        let mut id = 0i32;
        // SAFETY: live handle, valid string and out-pointer.
        check(unsafe { sys::dt_tokenizer_token_to_id(p, t.as_ptr(), &mut id) })?;
        Ok(id)
    }

    /// The special tokens as JSON: `{"bos_token":..,"eos_token":..,"bos_token_id":..,
    /// "eos_token_ids":[..],"vocab_size":..,"special":[{"id":..,"content":..},..],
    /// "chat_template":bool}`. `eos_token_ids` are what generation stops at: pass them as
    /// "stop_tokens".
    pub fn info_json(&self) -> Result<String> {
        let p = self.raw()?;
        // SAFETY: live handle; read_json passes a buffer of `cap` bytes.
        read_json(|buf, cap, needed| unsafe { sys::dt_tokenizer_info_json(p, buf, cap, needed) })
    }

    /// Renders a conversation with the chat template, byte for byte as transformers'
    /// `apply_chat_template(messages, tokenize=False, add_generation_prompt=...)`. Encode
    /// the text with `add_special_tokens` false: its special tokens are in it. A template
    /// that raises (roles that do not alternate, ...) is `Status::INVALID_ARGUMENT` with its
    /// message; a tokenizer without one `Status::NOT_FOUND` (pass a `chat_template`).
    pub fn apply_chat_template(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String> {
        let p = self.raw()?;
        let doc = cstring(&messages_json(messages), "messages")?;
        let gen = i32::from(add_generation_prompt);
        // SAFETY: live handle, valid string; read_json passes a buffer of `cap` bytes.
        read_text(|buf, cap, needed| unsafe {
            sys::dt_tokenizer_apply_chat_template(p, doc.as_ptr(), gen, buf, cap, needed)
        })
    }

    /// A streaming decode of this tokenizer's ids ([`Detokenizer`]).
    pub fn detokenizer(&self, skip_special_tokens: bool) -> Result<Detokenizer> {
        Detokenizer::new(self, skip_special_tokens)
    }
}

impl Drop for Tokenizer {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.ptr.is_null() {
            write!(f, "Tokenizer(closed)")
        } else {
            write!(f, "Tokenizer({:p})", self.ptr)
        }
    }
}

handle!(
    /// Streaming decode (`dt_detokenizer`): [`push`](Detokenizer::push) takes one id at a
    /// time and returns the text that became final (often empty, never half a character;
    /// a SentencePiece leading space handled as a whole decode handles it),
    /// [`finish`](Detokenizer::finish) the rest, so the pieces concatenate to
    /// [`Tokenizer::decode`] of all the ids. It keeps what it needs of its tokenizer alive:
    /// the tokenizer may be dropped first.
    Detokenizer, sys::dt_detokenizer, sys::dt_detokenizer_destroy, "Detokenizer"
);

impl Detokenizer {
    /// `skip_special_tokens` as for [`Tokenizer::decode`].
    pub fn new(tokenizer: &Tokenizer, skip_special_tokens: bool) -> Result<Detokenizer> {
        let t = tokenizer.raw()?;
        let mut out: *mut sys::dt_detokenizer = ptr::null_mut();
        // SAFETY: live tokenizer, valid out-pointer.
        check(unsafe { sys::dt_detokenizer_create(t, i32::from(skip_special_tokens), &mut out) })?;
        if out.is_null() {
            return Err(Error::new(
                Status::INTERNAL,
                "dtrain: a create call returned NULL",
            ));
        }
        Ok(Detokenizer::from_raw(out, Family::new()))
    }

    /// Adds one id; returns the text it made final (empty while it waits for more).
    pub fn push(&mut self, id: i32) -> Result<String> {
        let p = self.raw()?;
        // SAFETY: live handle, used by this thread alone (&mut self).
        check(unsafe { sys::dt_detokenizer_push(p, id) })?;
        self.text()
    }

    /// Ends the stream; returns what was held back (an incomplete UTF-8 tail as U+FFFD).
    /// A later push is `Status::INVALID_ARGUMENT`.
    pub fn finish(&mut self) -> Result<String> {
        let p = self.raw()?;
        // SAFETY: as above.
        check(unsafe { sys::dt_detokenizer_finish(p) })?;
        self.text()
    }

    /// The final text not yet returned ([`push`](Self::push) and
    /// [`finish`](Self::finish) return it already).
    pub fn text(&mut self) -> Result<String> {
        let p = self.raw()?;
        // SAFETY: live handle; read_json passes a buffer of `cap` bytes. The text is taken
        // only by the call whose buffer holds it.
        read_text(|buf, cap, needed| unsafe { sys::dt_detokenizer_text(p, buf, cap, needed) })
    }
}
