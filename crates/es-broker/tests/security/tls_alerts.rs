//! What a TLS client sees of es's handshake rules: `ssl.enabled.protocols`
//! applied, and a client certificate from an unknown CA, or none where one
//! is required, refused with the alert Java's TLS sends (bad_certificate),
//! which clients' suites expect.

use std::io::BufReader;
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{AlertDescription, ClientConfig, ClientConnection, RootCertStore};

use crate::common::{Broker, ES_BROKER};
use crate::pki::Pki;

fn certs(path: &Path) -> Vec<CertificateDer<'static>> {
    let pem = std::fs::read(path).expect("read pem");
    rustls_pemfile::certs(&mut BufReader::new(&pem[..]))
        .collect::<Result<_, _>>()
        .expect("certificates")
}

fn key(path: &Path) -> PrivateKeyDer<'static> {
    let pem = std::fs::read(path).expect("read key");
    rustls_pemfile::private_key(&mut BufReader::new(&pem[..]))
        .expect("key")
        .expect("a key")
}

/// Handshakes with `addr` as a client of TLS `version` trusting `ca`,
/// presenting `cert` when given: Ok, or the error the handshake ended with.
fn handshake(
    addr: &str,
    version: &'static rustls::SupportedProtocolVersion,
    ca: &Path,
    cert: Option<(&Path, &Path)>,
) -> Result<(), rustls::Error> {
    let mut roots = RootCertStore::empty();
    for c in certs(ca) {
        roots.add(c).expect("root");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[version])
        .expect("versions")
        .with_root_certificates(roots);
    let config = match cert {
        Some((c, k)) => builder
            .with_client_auth_cert(certs(c), key(k))
            .expect("client cert"),
        None => builder.with_no_client_auth(),
    };
    let name = ServerName::try_from("localhost").expect("name");
    let mut conn = ClientConnection::new(Arc::new(config), name).expect("connection");
    let mut sock = TcpStream::connect(addr).expect("connect");
    sock.set_read_timeout(Some(crate::TIMEOUT))
        .expect("timeout");
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut sock) {
            return Err(match e.into_inner() {
                Some(inner) => match inner.downcast::<rustls::Error>() {
                    Ok(tls) => *tls,
                    Err(other) => rustls::Error::General(other.to_string()),
                },
                None => rustls::Error::General("i/o error".into()),
            });
        }
    }
    // Under TLS 1.2 (all this test offers with a certificate that may be
    // refused) the server's Finished came after its check of the client's
    // certificate, so a finished handshake is an accepted one.
    Ok(())
}

#[test]
fn enabled_protocols_apply_and_an_unknown_or_missing_client_certificate_gets_bad_certificate() {
    let dir = tempfile::tempdir().expect("tmp");
    let pki = Pki::new(&dir.path().join("pki"));
    let other = Pki::new(&dir.path().join("other"));
    let dn = [(rcgen::DnType::CommonName, "alice")];
    let (good_cert, good_key) = pki.client("alice", &dn);
    let (bad_cert, bad_key) = other.client("mallory", &dn);
    let s = |p: &Path| p.to_str().expect("utf-8").to_string();
    let b = Broker::start(
        Path::new(ES_BROKER),
        dir.path().join("data"),
        &[
            "--listener",
            "SSL://127.0.0.1:0",
            "--ssl-cert",
            &s(&pki.server_cert),
            "--ssl-key",
            &s(&pki.server_key),
            "--ssl-ca",
            &s(&pki.ca),
            "--set",
            "ssl.client.auth=required",
            "--set",
            "ssl.enabled.protocols=TLSv1.2",
        ],
    );
    let v12 = &rustls::version::TLS12;
    let v13 = &rustls::version::TLS13;
    handshake(&b.addr, v12, &pki.ca, Some((&good_cert, &good_key)))
        .expect("a TLS 1.2 client with a certificate of the client CA");
    assert_eq!(
        handshake(&b.addr, v13, &pki.ca, Some((&good_cert, &good_key))),
        Err(rustls::Error::AlertReceived(
            AlertDescription::ProtocolVersion
        )),
        "TLS 1.3 offered with ssl.enabled.protocols=TLSv1.2"
    );
    assert_eq!(
        handshake(&b.addr, v12, &pki.ca, Some((&bad_cert, &bad_key))),
        Err(rustls::Error::AlertReceived(
            AlertDescription::BadCertificate
        )),
        "a client certificate of another CA"
    );
    // No certificate at all (librdkafka sends none when the server's CA
    // list does not name its issuer): Java's "Empty client certificate
    // chain", bad_certificate, not rustls's certificate_required.
    assert_eq!(
        handshake(&b.addr, v12, &pki.ca, None),
        Err(rustls::Error::AlertReceived(
            AlertDescription::BadCertificate
        )),
        "no client certificate under TLS 1.2"
    );
    handshake(&b.addr, v12, &pki.ca, Some((&good_cert, &good_key)))
        .expect("the listener still serves");
    b.stop();
}
