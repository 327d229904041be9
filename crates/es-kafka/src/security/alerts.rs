//! The one TLS alert es sends differently from rustls, to match Kafka's
//! JVM: a client that presents no certificate where one is required.
//!
//! Under TLS 1.2 Java's server refuses an empty client certificate chain
//! with bad_certificate (42) ("Empty client certificate chain"); rustls
//! sends certificate_required (116), an alert TLS 1.3 defined. Clients
//! tell them apart (librdkafka's 0097 accepts 42 only), so
//! [`JavaHandshakeAlerts`] sits under the TLS stream during the handshake
//! and rewrites that one record: a plaintext (TLS 1.2, unencrypted) fatal
//! alert of description 116 becomes 42. It follows the record framing of
//! what es writes (5-byte headers and lengths), so it looks only at whole
//! alert records, never at bytes inside other records. Under TLS 1.3 the
//! alert is encrypted (and Java sends certificate_required there too), so
//! nothing changes. After the handshake the wrapper is switched off and
//! passes bytes through untouched.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// TLS record content type of alerts.
const CONTENT_ALERT: u8 = 0x15;
/// TLS 1.2's record version.
const VERSION_TLS12: [u8; 2] = [0x03, 0x03];
const ALERT_FATAL: u8 = 2;
const ALERT_CERTIFICATE_REQUIRED: u8 = 116;
const ALERT_BAD_CERTIFICATE: u8 = 42;
const RECORD_HEADER_BYTES: usize = 5;

/// Where the scan is in the stream of records es writes.
#[derive(Clone, Copy, Debug, Default)]
struct RecordScan {
    header: [u8; RECORD_HEADER_BYTES],
    header_len: usize,
    body_left: usize,
    body_pos: usize,
    /// The record being read is a plaintext TLS 1.2 alert (2 bytes).
    alert: bool,
    level: u8,
}

impl RecordScan {
    /// Moves over `bytes` (the next ones written); pushes the index in
    /// `bytes` of each alert description to rewrite.
    fn advance(&mut self, bytes: &[u8], rewrite: &mut Vec<usize>) {
        let mut i = 0;
        while i < bytes.len() {
            if self.body_left == 0 {
                self.header[self.header_len] = bytes[i];
                self.header_len += 1;
                i += 1;
                if self.header_len == RECORD_HEADER_BYTES {
                    let len = usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                    self.alert = self.header[0] == CONTENT_ALERT
                        && self.header[1..3] == VERSION_TLS12
                        && len == 2;
                    self.body_left = len;
                    self.body_pos = 0;
                    self.header_len = 0;
                }
                continue;
            }
            let take = self.body_left.min(bytes.len() - i);
            if self.alert {
                for (j, &b) in bytes[i..i + take].iter().enumerate() {
                    match self.body_pos + j {
                        0 => self.level = b,
                        1 if self.level == ALERT_FATAL && b == ALERT_CERTIFICATE_REQUIRED => {
                            rewrite.push(i + j)
                        }
                        _ => {}
                    }
                }
            }
            self.body_pos += take;
            self.body_left -= take;
            i += take;
        }
    }
}

/// A stream whose writes have a TLS 1.2 certificate_required alert turned
/// into bad_certificate until [`JavaHandshakeAlerts::handshake_done`].
#[derive(Debug)]
pub struct JavaHandshakeAlerts<S> {
    inner: S,
    scanning: bool,
    scan: RecordScan,
}

impl<S> JavaHandshakeAlerts<S> {
    pub fn new(inner: S) -> Self {
        JavaHandshakeAlerts {
            inner,
            scanning: true,
            scan: RecordScan::default(),
        }
    }

    /// The handshake is over: bytes pass through untouched from now on.
    pub fn handshake_done(&mut self) {
        self.scanning = false;
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for JavaHandshakeAlerts<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JavaHandshakeAlerts<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !self.scanning {
            return Pin::new(&mut self.inner).poll_write(cx, buf);
        }
        // Scan a copy of the state first: only the bytes the stream takes
        // move the real one.
        let mut rewrite = Vec::new();
        let mut trial = self.scan;
        trial.advance(buf, &mut rewrite);
        let result = if rewrite.is_empty() {
            Pin::new(&mut self.inner).poll_write(cx, buf)
        } else {
            let mut patched = buf.to_vec();
            for &k in &rewrite {
                patched[k] = ALERT_BAD_CERTIFICATE;
            }
            tracing::debug!("client sent no certificate: bad_certificate, as Java's TLS 1.2");
            Pin::new(&mut self.inner).poll_write(cx, &patched)
        };
        if let Poll::Ready(Ok(n)) = result {
            let mut ignored = Vec::new();
            let taken = &buf[..n.min(buf.len())];
            self.scan.advance(taken, &mut ignored);
        }
        result
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrites(chunks: &[&[u8]]) -> Vec<Vec<usize>> {
        let mut s = RecordScan::default();
        chunks
            .iter()
            .map(|c| {
                let mut r = Vec::new();
                s.advance(c, &mut r);
                r
            })
            .collect()
    }

    #[test]
    fn only_a_whole_plaintext_fatal_certificate_required_alert_is_rewritten() {
        let handshake = [0x16, 0x03, 0x03, 0x00, 0x04, 0x15, 0x03, 0x03, 0x74];
        let alert = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x74];
        // Bytes that look like the alert inside another record are not.
        let mut both = handshake.to_vec();
        both.extend_from_slice(&alert);
        assert_eq!(rewrites(&[&both]), vec![vec![both.len() - 1]]);
        assert_eq!(rewrites(&[&handshake]), vec![Vec::<usize>::new()]);
        // Split anywhere.
        for cut in 0..alert.len() {
            let (a, b) = alert.split_at(cut);
            let got = rewrites(&[a, b]);
            let want: Vec<Vec<usize>> = if cut == alert.len() - 1 {
                vec![vec![], vec![0]]
            } else {
                vec![vec![], vec![alert.len() - 1 - cut]]
            };
            assert_eq!(got, want, "cut at {cut}");
        }
        // A warning, another alert, an encrypted (longer) alert record,
        // or a record of another version (0x0301) are left alone.
        for other in [
            [0x15, 0x03, 0x03, 0x00, 0x02, 0x01, 0x74].as_slice(),
            &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28],
            &[0x15, 0x03, 0x03, 0x00, 0x03, 0x02, 0x74, 0x00],
            &[0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x74],
        ] {
            assert_eq!(rewrites(&[other]), vec![Vec::<usize>::new()], "{other:?}");
        }
    }
}
