//! A throwaway PKI for the security tests: a CA, a server certificate for
//! localhost and 127.0.0.1, and client certificates with chosen subjects,
//! written as PEM files into a test's directory.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// The files of one PKI.
pub struct Pki {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    ca_cert: rcgen::Certificate,
    ca_key: KeyPair,
    dir: PathBuf,
}

impl Pki {
    /// A CA and a server certificate under `dir`.
    pub fn new(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).expect("pki dir");
        let ca_key = KeyPair::generate().expect("ca key");
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, "es test CA");
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = p.self_signed(&ca_key).expect("ca cert");
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, ca_cert.pem()).expect("write ca");
        let mut pki = Pki {
            ca,
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
            ca_cert,
            ca_key,
            dir: dir.to_path_buf(),
        };
        pki.server("server");
        pki
    }

    /// (Re)issues the server certificate, with `cn` as its common name.
    pub fn server(&mut self, cn: &str) {
        let key = KeyPair::generate().expect("server key");
        let mut p = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("server params");
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = p
            .signed_by(&key, &self.ca_cert, &self.ca_key)
            .expect("server cert");
        std::fs::write(&self.server_cert, cert.pem()).expect("write cert");
        std::fs::write(&self.server_key, key.serialize_pem()).expect("write key");
    }

    /// A client certificate for the subject `dn` ((type, value) pairs in
    /// encoding order); returns its (certificate, key) files.
    pub fn client(&self, name: &str, dn: &[(DnType, &str)]) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().expect("client key");
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("client params");
        for (t, v) in dn {
            p.distinguished_name.push(t.clone(), *v);
        }
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = p
            .signed_by(&key, &self.ca_cert, &self.ca_key)
            .expect("client cert");
        let c = self.dir.join(format!("{name}.pem"));
        let k = self.dir.join(format!("{name}.key"));
        std::fs::write(&c, cert.pem()).expect("write client cert");
        std::fs::write(&k, key.serialize_pem()).expect("write client key");
        (c, k)
    }
}
