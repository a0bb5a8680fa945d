//! Serving: continuous batching over a paged KV cache (`dt_server`), and its requests.
//!
//! The server runs on its own thread and its calls are thread-safe, so a [`Server`] is
//! `Send` and `Sync`: share `&Server` between threads to submit and read requests. The C
//! callback would run on the server's thread; this crate never passes one: a [`Request`]
//! reads its tokens with `dt_server_poll`, which waits on the calling thread.
use std::collections::VecDeque;
use std::ptr;
use std::time::Duration;

use dtrain_sys as sys;

use crate::error::{check, Error, Result, Status};
use crate::handle::{create, lock};
use crate::mesh::Mesh;
use crate::model::Model;
use crate::options::{CallOptions, Pairs};
use crate::read_json;

/// How long one poll waits for news (the iterator polls again until there is some).
const POLL_MS: i32 = 100;
/// Tokens taken per poll at most.
const CHUNK: usize = 256;

/// Where a request stands (`DT_REQUEST_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestState {
    /// Queued, not yet admitted.
    Waiting,
    /// Admitted: prefilling or decoding.
    Running,
    /// Sent back to the queue when the KV blocks ran out.
    Preempted,
    /// Ended: a stop token or max_tokens.
    Finished,
    /// Ended: cancelled, or the server stopped or failed.
    Aborted,
    /// Ended: it can never run (longer than the context or the cache).
    Rejected,
    /// A code this crate does not know (states are only ever appended).
    Other(i32),
}

impl RequestState {
    /// The state of a `DT_REQUEST_*` code.
    pub fn from_code(code: i32) -> RequestState {
        match code as u32 {
            sys::DT_REQUEST_WAITING => RequestState::Waiting,
            sys::DT_REQUEST_RUNNING => RequestState::Running,
            sys::DT_REQUEST_PREEMPTED => RequestState::Preempted,
            sys::DT_REQUEST_FINISHED => RequestState::Finished,
            sys::DT_REQUEST_ABORTED => RequestState::Aborted,
            sys::DT_REQUEST_REJECTED => RequestState::Rejected,
            _ => RequestState::Other(code),
        }
    }
}

/// Serves a GPT (`dt_server`). Dropping it (or [`Server::close`]) ends every request still
/// in flight; the borrow checker sees that no [`Request`] outlives it.
pub struct Server {
    ptr: *mut sys::dt_server,
}

// SAFETY: every dt_server_* call is thread-safe (dtrain.h), and close/drop take `&mut self`,
// so no call is in flight when the handle is released.
unsafe impl Send for Server {}
unsafe impl Sync for Server {}

impl Drop for Server {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.ptr.is_null() {
            write!(f, "Server(closed)")
        } else {
            write!(f, "Server({:p})", self.ptr)
        }
    }
}

impl Server {
    /// A server over `model`'s current weights (copied into the server: do not train the
    /// model while it lives). `mesh`: `None` (one rank) or a "local" mesh whose dp axis is
    /// the number of replicas, tp splits heads and pp places blocks; the server's thread
    /// runs its collectives from then on. Options: "block_size", "kv_blocks",
    /// "kv_cache_bytes", "max_num_seqs", "max_batched_tokens", "prefix_caching", "pp_blocks".
    pub fn new(mesh: Option<&Mesh>, model: &Model, options: &Pairs) -> Result<Server> {
        let pm = match mesh {
            Some(m) => m.raw()?,
            None => ptr::null_mut(),
        };
        let pmod = model.raw()?;
        let opts = CallOptions::new(options)?;
        let mut fams = vec![model.family()];
        fams.extend(mesh.map(Mesh::family));
        let p = {
            let _g = lock(&fams);
            create!(sys::dt_server, |out| sys::dt_server_create(
                pm,
                pmod,
                opts.ptr(),
                &mut out
            ))
        };
        Ok(Server { ptr: p })
    }

    /// Ends every request in flight, stops the server's thread and releases it. Idempotent;
    /// dropping does the same. Later calls fail with `Status::INVALID_ARGUMENT`.
    pub fn close(&mut self) {
        let p = std::mem::replace(&mut self.ptr, ptr::null_mut());
        if !p.is_null() {
            // SAFETY: owned, released exactly once, no call in flight (`&mut self`).
            unsafe { sys::dt_server_destroy(p) }
        }
    }

    pub fn is_closed(&self) -> bool {
        self.ptr.is_null()
    }

    /// The raw C handle (NULL once closed); it stays owned by `self`.
    pub fn as_raw(&self) -> *mut sys::dt_server {
        self.ptr
    }

    fn raw(&self) -> Result<*mut sys::dt_server> {
        if self.ptr.is_null() {
            Err(Error::closed("Server"))
        } else {
            Ok(self.ptr)
        }
    }

    /// Queues a request for `prompt` (token ids) and returns it: iterate it for its new
    /// tokens. Options: "max_tokens" (default 16), "temperature" (0: greedy), "top_k",
    /// "top_p", "seed", "stop_tokens" ("3,7"). `Status::INVALID_ARGUMENT` naming a bad key
    /// or value; `Status::UNAVAILABLE` while the server drains or after it failed.
    pub fn submit(&self, prompt: &[i32], options: &Pairs) -> Result<Request<'_>> {
        let p = self.raw()?;
        if prompt.is_empty() {
            return Err(Error::invalid("dtrain: a prompt needs at least one token"));
        }
        let opts = CallOptions::new(options)?;
        let mut id = 0i64;
        // SAFETY: live handle; the prompt holds prompt.len() ids; no callback.
        check(unsafe {
            sys::dt_server_submit(
                p,
                prompt.as_ptr(),
                prompt.len() as i64,
                opts.ptr(),
                None,
                ptr::null_mut(),
                &mut id,
            )
        })?;
        Ok(Request {
            server: self,
            id,
            pending: VecDeque::new(),
            chunk: vec![0; CHUNK],
            state: RequestState::Waiting,
            done: false,
            error: None,
        })
    }

    /// Aborts request `id` (any thread may): `Ok(false)` when it had already ended.
    pub fn cancel(&self, id: i64) -> Result<bool> {
        let p = self.raw()?;
        // SAFETY: live handle.
        match check(unsafe { sys::dt_server_cancel(p, id) }) {
            Ok(()) => Ok(true),
            Err(e) if e.status == Status::NOT_FOUND => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Stops accepting requests and waits up to `timeout` for those in flight to end
    /// (`Status::TIMEOUT` if some still run then).
    pub fn drain(&self, timeout: Duration) -> Result<()> {
        let p = self.raw()?;
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: live handle.
        check(unsafe { sys::dt_server_drain(p, ms) })
    }

    /// Statistics as JSON: {"requests":{"waiting":..,"running":..,"finished":..,..},
    /// "tokens":{..},"tokens_per_s":..,"ttft_s":{..},"itl_s":{..},"kv_cache":{..},..}.
    pub fn stats_json(&self) -> Result<String> {
        let p = self.raw()?;
        // SAFETY: live handle; read_json passes a buffer of `cap` bytes.
        read_json(|buf, cap, needed| unsafe { sys::dt_server_stats_json(p, buf, cap, needed) })
    }

    /// The same figures in Prometheus text format.
    pub fn metrics_text(&self) -> Result<String> {
        let p = self.raw()?;
        // SAFETY: as above.
        read_json(|buf, cap, needed| unsafe { sys::dt_server_metrics_text(p, buf, cap, needed) })
    }

    /// The model's (context length, vocabulary size).
    pub fn model_info(&self) -> Result<(i64, i64)> {
        let p = self.raw()?;
        let (mut context, mut vocab) = (0i64, 0i64);
        // SAFETY: live handle, valid out-pointers.
        check(unsafe { sys::dt_server_model_info(p, &mut context, &mut vocab) })?;
        Ok((context, vocab))
    }
}

/// A submitted request: an iterator over its new token ids as the server makes them, which
/// ends when the request ends ([`Request::state`] then says how). `next` waits for the
/// next token. Dropping a request that has not ended cancels it.
pub struct Request<'s> {
    server: &'s Server,
    id: i64,
    pending: VecDeque<i32>,
    chunk: Vec<i32>,
    state: RequestState,
    done: bool,
    error: Option<Error>,
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Request({}, {:?})", self.id, self.state)
    }
}

impl Request<'_> {
    /// The request's id on its server (for [`Server::cancel`] from another thread).
    pub fn id(&self) -> i64 {
        self.id
    }

    fn poll(&mut self, timeout_ms: i32) {
        let mut n = 0i64;
        let (mut state, mut done) = (0i32, 0i32);
        let result = self.server.raw().and_then(|p| {
            // SAFETY: live handle; chunk holds chunk.len() ids; valid out-pointers.
            check(unsafe {
                sys::dt_server_poll(
                    p,
                    self.id,
                    self.chunk.as_mut_ptr(),
                    self.chunk.len() as i64,
                    &mut n,
                    &mut state,
                    &mut done,
                    timeout_ms,
                )
            })
        });
        match result {
            Ok(()) => {
                let n = (n.max(0) as usize).min(self.chunk.len());
                self.pending.extend(&self.chunk[..n]);
                self.state = RequestState::from_code(state);
                self.done = done != 0;
            }
            Err(e) => {
                // Cannot happen for a live request; the iteration ends and says why.
                self.error = Some(e);
                self.done = true;
            }
        }
    }

    /// Where the request stands now.
    pub fn state(&mut self) -> RequestState {
        if !self.done {
            self.poll(0);
        }
        self.state
    }

    /// Whether the request ended and every token was taken from the server.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The error that ended the iteration early, if a poll failed.
    pub fn error(&self) -> Option<&Error> {
        self.error.as_ref()
    }

    /// Aborts the request: its KV blocks are freed, the iteration ends and the state is
    /// [`RequestState::Aborted`]. `Ok(false)` when it had already ended.
    pub fn cancel(&self) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        self.server.cancel(self.id)
    }
}

impl Iterator for Request<'_> {
    type Item = i32;

    fn next(&mut self) -> Option<i32> {
        while self.pending.is_empty() {
            if self.done {
                return None;
            }
            self.poll(POLL_MS);
        }
        self.pending.pop_front()
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.server.cancel(self.id);
        }
    }
}
