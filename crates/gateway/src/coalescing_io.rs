//! A client connection that writes each burst of responses with one system call.
//!
//! The HTTP/2 connection task writes and flushes whatever frames it has every time it runs.
//! When a partition answers a batch of requests, their response tasks become ready together,
//! but each one wakes the connection task, which then ran right after it (tokio runs the task
//! woken last first) and wrote a single response: about one `writev` per response. This wrapper
//! makes the first write after a flush yield once: the connection task goes to the back of the
//! run queue, the other ready response tasks add their frames, and one write carries them all.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A TCP connection whose first write after each flush yields to the other ready tasks once.
#[derive(Debug)]
pub struct CoalescingIo {
    inner: TcpStream,
    /// The next write yields first (set by a completed flush, cleared by the yield).
    yield_next_write: bool,
}

impl CoalescingIo {
    pub fn new(inner: TcpStream) -> Self {
        Self { inner, yield_next_write: true }
    }

    /// Yields once if armed: wakes this task (it is queued behind the tasks already ready) and
    /// reports the write as pending.
    fn yield_once(&mut self, cx: &mut Context<'_>) -> bool {
        if self.yield_next_write {
            self.yield_next_write = false;
            cx.waker().wake_by_ref();
            return true;
        }
        false
    }
}

impl AsyncRead for CoalescingIo {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for CoalescingIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.yield_once(cx) {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        if self.yield_once(cx) {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        if flushed.is_ready() {
            self.yield_next_write = true;
        }
        flushed
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    use super::*;

    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn first_write_after_a_flush_yields_once_and_bytes_arrive_in_order() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let mut io = CoalescingIo::new(server);
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = std::task::Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);

        // armed: the first write yields and wakes the task
        assert!(Pin::new(&mut io).poll_write(&mut cx, b"one").is_pending());
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
        // then writes pass through until a flush completes
        assert!(matches!(Pin::new(&mut io).poll_write(&mut cx, b"one"), Poll::Ready(Ok(3))));
        assert!(matches!(Pin::new(&mut io).poll_write(&mut cx, b"two"), Poll::Ready(Ok(3))));
        assert!(Pin::new(&mut io).poll_flush(&mut cx).is_ready());
        // a flush re-arms it
        assert!(Pin::new(&mut io).poll_write(&mut cx, b"three").is_pending());
        assert_eq!(counter.0.load(Ordering::SeqCst), 2);
        assert!(matches!(Pin::new(&mut io).poll_write(&mut cx, b"three"), Poll::Ready(Ok(5))));

        let mut received = vec![0; 11];
        let mut client = client;
        client.read_exact(&mut received).await.unwrap();
        assert_eq!(received, b"onetwothree");
    }
}
