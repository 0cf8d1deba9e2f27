//! A connection that closes as RFC 9112 section 9.6 asks of a server that
//! answered before reading the whole request (a 401, 403 or 413): it stops
//! writing first (a FIN after the answer), then reads and discards what the
//! client still sends, for a bounded time and size, before it closes. A
//! close with unread bytes would make the kernel send a reset, which can
//! discard the answer before the client reads it, and fail a client still
//! sending with a broken pipe.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

/// The longest a closing connection keeps reading.
pub const LINGER_TIME: Duration = Duration::from_secs(2);
/// The most a closing connection reads and discards: what the largest body
/// the local API takes could still have to send, and more.
pub const LINGER_BYTES: usize = 64 * 1024 * 1024;

/// A TCP stream whose shutdown lingers (see the module).
pub struct Lingering {
    stream: TcpStream,
    closing: Option<Closing>,
}

/// A shutdown under way: the write side is closed, the rest is drained.
struct Closing {
    until: Pin<Box<Sleep>>,
    left: usize,
}

impl Lingering {
    /// Wraps an accepted stream.
    pub fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            closing: None,
        }
    }
}

impl AsyncRead for Lingering {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Lingering {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.closing.is_none() {
            // The answer is written: send FIN, keep the read side open.
            ready!(Pin::new(&mut this.stream).poll_shutdown(cx))?;
            this.closing = Some(Closing {
                until: Box::pin(tokio::time::sleep(LINGER_TIME)),
                left: LINGER_BYTES,
            });
        }
        let Some(closing) = this.closing.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let mut scratch = [0u8; 16 * 1024];
        loop {
            if closing.until.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ok(()));
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut this.stream).poll_read(cx, &mut buf) {
                Poll::Pending => return Poll::Pending,
                // The client closed (or the connection broke): nothing unread.
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => {
                    closing.left = closing.left.saturating_sub(buf.filled().len());
                    if closing.left == 0 {
                        return Poll::Ready(Ok(()));
                    }
                }
            }
        }
    }
}
