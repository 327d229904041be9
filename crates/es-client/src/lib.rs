//! es's own blocking Kafka client: one connection to one broker, logged in
//! as a client's settings say (TLS with rustls; SASL PLAIN, SCRAM-SHA-256
//! and SCRAM-SHA-512), carrying typed requests of the `kafka-protocol`
//! crate and es's own JSON requests.
//!
//! It exists for the few calls librdkafka has no API for: `es-broker keys`
//! against a running broker, and a mirror link's reading of the source's
//! client quotas (DescribeClientQuotas). Data is never moved with it: the
//! mirror reads records with librdkafka.
//!
//! Settings come in the two spellings users have: Kafka's Java client
//! properties ([`settings::ClientSettings::from_java`], as Kafka's tools
//! take `--command-config`) and librdkafka's names
//! ([`settings::ClientSettings::from_librdkafka`], as a mirror link holds
//! them). The broker is not trusted: a response frame larger than
//! [`RESPONSE_BYTES_MAX`] is refused before anything is allocated for it,
//! every read and write has the settings' timeout, and a response must
//! carry the request's correlation id.

pub mod settings;
mod tls;

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use es_auth::scram_client::ScramClient;
use kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

pub use settings::{ClientSettings, SaslMechanism, SaslSettings, TlsSettings};

/// Largest response frame accepted.
pub const RESPONSE_BYTES_MAX: usize = 16 << 20;

/// Why a connection or a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("settings: {0}")]
    Settings(String),
    #[error("connecting to {addr}: {why}")]
    Connect { addr: String, why: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the broker sent a frame of {0} bytes")]
    Frame(i64),
    #[error("the response carries correlation id {got}, not {want}")]
    Correlation { got: i32, want: i32 },
    #[error("encoding or decoding: {0}")]
    Codec(String),
    #[error("authentication failed: {0}")]
    Auth(String),
}

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// A connection to one broker, logged in.
pub struct Connection {
    stream: Box<dyn Stream>,
    correlation_id: i32,
    client_id: String,
    addr: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Connection {
    /// Connects to the first of `bootstrap` (comma-separated HOST:PORT)
    /// that answers, and logs in as `settings` say. The error is the last
    /// address's.
    pub fn open_any(bootstrap: &str, settings: &ClientSettings) -> Result<Connection, ClientError> {
        let mut last = ClientError::Settings("no bootstrap server".into());
        for addr in bootstrap
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
        {
            match Connection::open(addr, settings) {
                Ok(c) => return Ok(c),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Connects to `addr` (HOST:PORT) and logs in as `settings` say.
    pub fn open(addr: &str, settings: &ClientSettings) -> Result<Connection, ClientError> {
        let connect_error = |why: String| ClientError::Connect {
            addr: addr.to_string(),
            why,
        };
        let sockets = addr
            .to_socket_addrs()
            .map_err(|e| connect_error(e.to_string()))?;
        let mut tcp = Err(connect_error("no address".into()));
        for a in sockets {
            match TcpStream::connect_timeout(&a, settings.timeout) {
                Ok(s) => {
                    tcp = Ok(s);
                    break;
                }
                Err(e) => tcp = Err(connect_error(e.to_string())),
            }
        }
        let tcp = tcp?;
        tcp.set_read_timeout(Some(settings.timeout))?;
        tcp.set_write_timeout(Some(settings.timeout))?;
        tcp.set_nodelay(true)?;
        let stream: Box<dyn Stream> = match &settings.tls {
            Some(t) => Box::new(tls::wrap(tcp, addr, t)?),
            None => Box::new(tcp),
        };
        let mut c = Connection {
            stream,
            correlation_id: 0,
            client_id: settings.client_id.clone(),
            addr: addr.to_string(),
        };
        if let Some(s) = &settings.sasl {
            c.login(s)?;
        }
        Ok(c)
    }

    /// The address this connection went to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    fn login(&mut self, s: &SaslSettings) -> Result<(), ClientError> {
        let mut h = SaslHandshakeRequest::default();
        h.mechanism = StrBytes::from_string(s.mechanism.name().to_string());
        let r: SaslHandshakeResponse = self.call(ApiKey::SaslHandshake, 1, &h)?;
        if r.error_code != 0 {
            let offered: Vec<&str> = r.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(ClientError::Auth(format!(
                "the broker does not take {} (error {}; it offers {offered:?})",
                s.mechanism.name(),
                r.error_code
            )));
        }
        match s.mechanism {
            SaslMechanism::Plain => {
                let token = format!("\0{}\0{}", s.username, s.password).into_bytes();
                self.authenticate(token)?;
            }
            SaslMechanism::Scram(m) => {
                let mut scram = ScramClient::new(m, &s.username, &s.password);
                let first = scram.client_first().map_err(ClientError::Auth)?;
                let server_first = self.authenticate(first)?;
                let last = scram
                    .client_final(&server_first)
                    .map_err(ClientError::Auth)?;
                let server_final = self.authenticate(last)?;
                scram
                    .verify_server_final(&server_final)
                    .map_err(ClientError::Auth)?;
            }
        }
        Ok(())
    }

    /// One SaslAuthenticate round: the server's bytes.
    fn authenticate(&mut self, bytes: Vec<u8>) -> Result<Bytes, ClientError> {
        let mut a = SaslAuthenticateRequest::default();
        a.auth_bytes = Bytes::from(bytes);
        let r: SaslAuthenticateResponse = self.call(ApiKey::SaslAuthenticate, 2, &a)?;
        if r.error_code != 0 {
            return Err(ClientError::Auth(format!(
                "error {}: {}",
                r.error_code,
                r.error_message.as_deref().unwrap_or("")
            )));
        }
        Ok(r.auth_bytes)
    }

    /// Sends `req` as API `key` at `version` and decodes the answer.
    pub fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> Result<Resp, ClientError> {
        let codec = |e: anyhow::Error| ClientError::Codec(e.to_string());
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = self.correlation_id;
        header.client_id = Some(StrBytes::from_string(self.client_id.clone()));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, key.request_header_version(version))
            .map_err(codec)?;
        req.encode(&mut body, version).map_err(codec)?;
        self.send(&body)?;
        let mut resp = self.receive()?;
        let h = ResponseHeader::decode(&mut resp, key.response_header_version(version))
            .map_err(codec)?;
        self.check_correlation(h.correlation_id)?;
        Resp::decode(&mut resp, version).map_err(codec)
    }

    /// Sends one of es's own requests (api key `api_key`, version 0, the
    /// bytes `body` after the header's api key, version and correlation
    /// id); the response's bytes after its correlation id.
    pub fn call_raw(&mut self, api_key: i16, body: &[u8]) -> Result<Bytes, ClientError> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let mut frame = BytesMut::with_capacity(8 + body.len());
        frame.put_i16(api_key);
        frame.put_i16(0);
        frame.put_i32(self.correlation_id);
        frame.put_slice(body);
        self.send(&frame)?;
        let resp = self.receive()?;
        let Some(id) = resp.get(..4) else {
            return Err(ClientError::Frame(resp.len() as i64));
        };
        self.check_correlation(i32::from_be_bytes([id[0], id[1], id[2], id[3]]))?;
        Ok(resp.slice(4..))
    }

    fn check_correlation(&self, got: i32) -> Result<(), ClientError> {
        if got == self.correlation_id {
            Ok(())
        } else {
            Err(ClientError::Correlation {
                got,
                want: self.correlation_id,
            })
        }
    }

    fn send(&mut self, body: &[u8]) -> Result<(), ClientError> {
        let len = i32::try_from(body.len()).map_err(|_| ClientError::Frame(body.len() as i64))?;
        let mut frame = BytesMut::with_capacity(4 + body.len());
        frame.put_i32(len);
        frame.put_slice(body);
        self.stream.write_all(&frame)?;
        self.stream.flush()?;
        Ok(())
    }

    fn receive(&mut self) -> Result<Bytes, ClientError> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size)?;
        let size = i32::from_be_bytes(size);
        let len = usize::try_from(size)
            .ok()
            .filter(|l| *l <= RESPONSE_BYTES_MAX && *l >= 4)
            .ok_or(ClientError::Frame(i64::from(size)))?;
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body)?;
        Ok(Bytes::from(body))
    }
}

/// The default timeout of one read or write.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
