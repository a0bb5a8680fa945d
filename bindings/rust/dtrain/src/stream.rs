//! Generation as an iterator: [`Engine::stream`] and its [`TokenStream`].
//!
//! The C call pushes tokens through a callback until it returns, so a pull-style iterator
//! runs it on a worker thread that sends each token down a channel. Leaving the iteration
//! early raises the stream's cancel flag (the generation stops before its next decode step)
//! and joins the worker, so nothing of the call outlives the stream.
use std::marker::PhantomData;
use std::os::raw::c_void;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use dtrain_sys as sys;

use crate::cancel::CancelToken;
use crate::engine::{flatten, Attached, Engine, EngineRef, Outputs, Prompts};
use crate::error::{check, Error, Result, Status};
use crate::handle::{lock, Family};
use crate::options::{CallOptions, Pairs};

enum Msg {
    Token(i32),
    /// The call returned: `Ok` once every token was sent, else why it stopped.
    End(Result<()>),
}

/// The new tokens of one prompt, as [`Engine::stream`] makes them: `Ok(token)` items, then
/// `None` at the end, or a last `Err` if the generation failed (a bad option, or
/// `Status::CANCELLED` when [`TokenStream::cancel`] stopped it). Dropping the stream before
/// the end stops the generation and waits for it to return (within one decode step).
///
/// ```no_run
/// # fn demo(engine: &mut dtrain::Engine) -> dtrain::Result<()> {
/// let prompt: Vec<i32> = "123+456=".bytes().map(i32::from).collect();
/// for token in engine.stream(&prompt, &[("max_new_tokens", 5.into())])? {
///     print!("{}", token? as u8 as char);
/// }
/// let first3: Vec<i32> = engine.stream(&prompt, &[])?.take(3).collect::<Result<_, _>>()?;
/// # Ok(()) }
/// ```
pub struct TokenStream<'e> {
    rx: Receiver<Msg>,
    token: CancelToken,
    worker: Option<JoinHandle<()>>,
    done: bool,
    // The engine is borrowed while its generation runs, as for any other call.
    _engine: PhantomData<&'e mut Engine>,
}

impl Engine {
    /// Continues `prompt` (token ids) on a worker thread and returns its new tokens as an
    /// iterator. Options as for [`Engine::generate`]. Errors found before the generation
    /// starts (the engine closed, the output cannot be allocated) are returned here; the
    /// library's (a bad option or prompt) arrive as the iterator's last item.
    pub fn stream(&mut self, prompt: &[i32], options: &Pairs) -> Result<TokenStream<'_>> {
        let (engine, fams) = self.share()?;
        let job = Job {
            engine,
            fams,
            prompts: flatten(&[prompt])?,
            options: CallOptions::new(options)?,
            out: Outputs::new(1, options)?,
            token: CancelToken::new()?,
        };
        let token = job.token.clone();
        let (tx, rx) = mpsc::channel();
        let worker = thread::Builder::new()
            .name("dtrain-stream".to_string())
            .spawn(move || job.run(tx))
            .map_err(|e| {
                Error::new(
                    Status::INTERNAL,
                    format!("dtrain: cannot start the generation thread: {e}"),
                )
            })?;
        Ok(TokenStream {
            rx,
            token,
            worker: Some(worker),
            done: false,
            _engine: PhantomData,
        })
    }
}

impl TokenStream<'_> {
    /// Stops the generation: the iteration ends with `Err` (`Status::CANCELLED`) unless it
    /// had already ended. [`TokenStream::cancel_token`] does the same from other threads.
    pub fn cancel(&self) {
        self.token.cancel();
    }

    /// A token that stops this stream when raised, for another thread.
    pub fn cancel_token(&self) -> CancelToken {
        self.token.clone()
    }

    fn finish(&mut self) {
        self.done = true;
        if let Some(w) = self.worker.take() {
            // The worker never panics (it only calls C and sends); if it did, the
            // iteration has ended anyway.
            let _ = w.join();
        }
    }
}

impl Iterator for TokenStream<'_> {
    type Item = Result<i32>;

    fn next(&mut self) -> Option<Result<i32>> {
        if self.done {
            return None;
        }
        let end = match self.rx.recv() {
            Ok(Msg::Token(t)) => return Some(Ok(t)),
            Ok(Msg::End(r)) => r,
            Err(_) => Err(Error::new(
                Status::INTERNAL,
                "dtrain: the generation thread ended without a result",
            )),
        };
        self.finish();
        end.err().map(Err)
    }
}

// Once it has returned None it always does.
impl std::iter::FusedIterator for TokenStream<'_> {}

impl Drop for TokenStream<'_> {
    fn drop(&mut self) {
        self.token.cancel();
        self.finish();
    }
}

impl std::fmt::Debug for TokenStream<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenStream(done: {})", self.done)
    }
}

/// Everything the worker owns. It holds an owner of the C engine (not a borrow), so that
/// even a leaked stream cannot see the engine released under it.
struct Job {
    engine: Arc<EngineRef>,
    fams: Vec<Family>,
    prompts: Prompts,
    options: CallOptions,
    out: Outputs,
    token: CancelToken,
}

/// The callback's state: where tokens go.
struct Sink {
    tx: Sender<Msg>,
}

unsafe extern "C" fn send_token(user: *mut c_void, _prompt_index: i32, token: i32) -> i32 {
    // SAFETY: `user` is the Job's Sink, alive for the whole call.
    let sink = &*(user as *const Sink);
    // Nobody reads any more (the stream is gone): ask the generation to stop.
    i32::from(sink.tx.send(Msg::Token(token)).is_err())
}

impl Job {
    fn run(mut self, tx: Sender<Msg>) {
        let result = self.generate(&tx);
        // The stream may be gone already; then nobody needs the result.
        let _ = tx.send(Msg::End(result));
    }

    fn generate(&mut self, tx: &Sender<Msg>) -> Result<()> {
        let p = self.engine.ptr();
        let fams: Vec<&Family> = self.fams.iter().collect();
        let _g = lock(&fams);
        // SAFETY: `self.engine` owns the engine, locked until `_attached` detaches.
        let _attached = unsafe { Attached::new(p, &self.token)? };
        let sink = Sink { tx: tx.clone() };
        let (pr, out) = (&self.prompts, &mut self.out);
        // SAFETY: the buffers hold one prompt and a row of `cap` tokens plus its length;
        // `sink` outlives the call. The status is read on this thread before detaching.
        check(unsafe {
            sys::dt_engine_generate_stream_v2(
                p,
                pr.tokens.as_ptr(),
                pr.lengths.as_ptr(),
                pr.n,
                self.options.ptr(),
                Some(send_token),
                &sink as *const Sink as *mut c_void,
                out.tokens.as_mut_ptr(),
                out.cap,
                out.lengths.as_mut_ptr(),
            )
        })
    }
}
