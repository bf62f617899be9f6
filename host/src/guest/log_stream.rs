//! A guest's stdout and stderr as guest log lines: `tracing` events with target `guest`, like
//! `host.log`, bounded per call.
//!
//! Each stream keeps [`MAX_BYTES_PER_CALL`] bytes per call and drops the rest (the guest's
//! writes still succeed, so printing a megabyte only truncates it); a line is logged when it
//! ends, cut at [`MAX_LINE_BYTES`] (marked `…`), and an unfinished one when the call ends.
//! stdout lines are `INFO` events, stderr lines `WARN`, each with the guest's `digest` and its
//! `stream`.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use tracing::{info, warn};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Bytes of one stream kept per call; the rest are dropped with one warning.
pub(super) const MAX_BYTES_PER_CALL: usize = 4 << 10;

/// Bytes of one line kept; a longer line is cut.
pub(super) const MAX_LINE_BYTES: usize = 1 << 10;

/// Which of the guest's output streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// One stream's lines of one call.
pub(super) struct Sink {
    digest: Arc<str>,
    stream: Stream,
    /// The unfinished line.
    line: Vec<u8>,
    /// Whether the unfinished line was cut; the rest of it is dropped.
    cut: bool,
    /// Bytes written by the guest this call, kept or not.
    written: usize,
    last_line: Option<String>,
}

impl Sink {
    pub(super) fn new(digest: Arc<str>, stream: Stream) -> Self {
        Self {
            digest,
            stream,
            line: Vec::new(),
            cut: false,
            written: 0,
            last_line: None,
        }
    }

    /// Takes what the guest wrote, within the budget.
    pub(super) fn write(&mut self, bytes: &[u8]) {
        let room = MAX_BYTES_PER_CALL.saturating_sub(self.written);
        self.written = self.written.saturating_add(bytes.len());
        if bytes.len() > room && self.written - bytes.len() <= MAX_BYTES_PER_CALL {
            warn!(
                target: "guest", digest = %self.digest, stream = self.stream.name(),
                "guest {} budget of {MAX_BYTES_PER_CALL} bytes per call exhausted; dropping the rest",
                self.stream.name()
            );
        }
        for &b in &bytes[..bytes.len().min(room)] {
            if b == b'\n' {
                self.emit();
            } else if self.line.len() < MAX_LINE_BYTES {
                self.line.push(b);
            } else {
                self.cut = true;
            }
        }
    }

    /// Logs the unfinished line, if any.
    pub(super) fn finish(&mut self) {
        if !self.line.is_empty() {
            self.emit();
        }
    }

    /// The last line logged this call.
    pub(super) fn last_line(&self) -> Option<String> {
        self.last_line.clone()
    }

    fn emit(&mut self) {
        let mut text = String::from_utf8_lossy(&self.line).into_owned();
        if self.cut {
            text.push(crate::text::MARK);
        }
        self.line.clear();
        self.cut = false;
        let (digest, stream) = (&*self.digest, self.stream.name());
        match self.stream {
            Stream::Stdout => info!(target: "guest", digest, stream, "{text}"),
            Stream::Stderr => warn!(target: "guest", digest, stream, "{text}"),
        }
        self.last_line = Some(text);
    }
}

/// The stdout or stderr handed to wasmtime-wasi: every handle the guest opens writes to the
/// same sink.
#[derive(Clone)]
pub(super) struct LogStream(pub Arc<Mutex<Sink>>);

impl LogStream {
    fn write(&self, bytes: &[u8]) {
        // NB: a sink is only appended to; a panic elsewhere cannot leave it torn.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .write(bytes);
    }
}

impl IsTerminal for LogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for LogStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        LogStream::write(self, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(MAX_BYTES_PER_CALL)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for LogStream {
    async fn ready(&mut self) {}
}

impl AsyncWrite for LogStream {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        LogStream::write(&self, buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink() -> Sink {
        Sink::new("sha256:test".into(), Stream::Stderr)
    }

    #[test]
    fn lines_are_split_cut_and_finished() {
        let mut s = sink();
        s.write(b"one\ntw");
        assert_eq!(s.last_line().as_deref(), Some("one"));
        s.write(b"o\n");
        assert_eq!(s.last_line().as_deref(), Some("two"));
        s.write(&[b'x'; MAX_LINE_BYTES + 10]);
        s.finish();
        let last = s.last_line().expect("a line");
        assert_eq!(last.len(), MAX_LINE_BYTES + '…'.len_utf8());
        assert!(last.ends_with('…'));
    }

    #[test]
    fn a_megabyte_keeps_only_the_budget() {
        let mut s = sink();
        let line = [b"y".repeat(99), b"\n".to_vec()].concat();
        for _ in 0..10_000 {
            s.write(&line);
        }
        // 4096 bytes of 100-byte lines: 40 whole lines, then 96 bytes of the 41st.
        s.finish();
        assert_eq!(s.written, 1_000_000);
        assert_eq!(s.last_line().map(|l| l.len()), Some(96));
    }
}
