//! A test certificate on disk, and the hashes a browser needs to trust it.
//!
//! Why this exists: Chromium will not load a page from a self-signed server
//! unless it is told which key to accept, by the base64 SHA-256 of the
//! certificate's SubjectPublicKeyInfo (`--ignore-certificate-errors-spki-list`).
//! `artq serve` keeps its self-signed certificate in memory, so the browser
//! tests make their own here, write it as PEM for `--cert/--key`, and hand the
//! same DER to the quinn h3 reference server. The SPKI hash computed here is
//! checked against the README's openssl pipeline in `harness_selfcheck/`.

use std::path::{Path, PathBuf};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A self-signed certificate for `localhost` and `127.0.0.1`, written as PEM.
pub struct TestCert {
    /// PEM certificate (`--cert`).
    pub cert_pem: PathBuf,
    /// PEM PKCS#8 private key (`--key`).
    pub key_pem: PathBuf,
    /// The certificate, DER.
    pub cert_der: CertificateDer<'static>,
    /// The private key, PKCS#8 DER.
    key_der: Vec<u8>,
    /// base64(SHA-256(SubjectPublicKeyInfo DER)): Chromium's SPKI pin format.
    pub spki_sha256_base64: String,
}

impl TestCert {
    /// Generates a fresh ECDSA P-256 key and certificate and writes
    /// `<dir>/cert.pem` and `<dir>/key.pem`.
    pub fn generate(dir: &Path) -> Result<TestCert, String> {
        let ck = rcgen::generate_simple_self_signed(vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
        ])
        .map_err(|e| format!("rcgen: {e}"))?;
        let cert_pem = dir.join("cert.pem");
        let key_pem = dir.join("key.pem");
        std::fs::write(&cert_pem, ck.cert.pem())
            .map_err(|e| format!("write {}: {e}", cert_pem.display()))?;
        std::fs::write(&key_pem, ck.key_pair.serialize_pem())
            .map_err(|e| format!("write {}: {e}", key_pem.display()))?;
        let spki = ck.key_pair.public_key_der();
        let digest = ring::digest::digest(&ring::digest::SHA256, &spki);
        Ok(TestCert {
            cert_pem,
            key_pem,
            cert_der: ck.cert.der().clone(),
            key_der: ck.key_pair.serialize_der(),
            spki_sha256_base64: base64(digest.as_ref()),
        })
    }

    /// The private key as rustls wants it.
    pub fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivatePkcs8KeyDer::from(self.key_der.clone()).into()
    }

    /// `--cert F --key F` for `artq serve`.
    pub fn serve_args(&self) -> Vec<String> {
        vec![
            "--cert".to_string(),
            self.cert_pem.display().to_string(),
            "--key".to_string(),
            self.key_pem.display().to_string(),
        ]
    }
}

/// Standard base64 with padding (RFC 4648 section 4), as Chromium's SPKI list
/// and `openssl base64` write it.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Lowercase hex SHA-256 of the file at `path`.
pub fn sha256_file_hex(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    Ok(sha256_hex(&bytes))
}

/// Writes a certificate chain of `len` RSA-2048 certificates below a root
/// (the root itself is not in the chain) to `<dir>/cert.pem`, leaf first,
/// and the leaf's key to `<dir>/priv.key`; the interop runner's
/// `amplificationlimit` certificates (its `certs.sh` with a chain length of
/// 9: about 8 KB, which no server can send within three times a 1200-byte
/// Initial). Made with the `openssl` command line, as the runner does;
/// scratch files go to `dir`.
pub fn write_long_chain(dir: &Path, len: usize) -> Result<(PathBuf, PathBuf), String> {
    let openssl = |args: &[&str]| -> Result<(), String> {
        let mut cmd = std::process::Command::new("openssl");
        cmd.args(args).current_dir(dir);
        let run = super::process::run_with_deadline(cmd, std::time::Duration::from_secs(60))
            .map_err(|e| format!("openssl (is it installed?): {e}"))?;
        if !run.status.success() {
            return Err(format!(
                "openssl {args:?} failed ({}): {}",
                run.status, run.stderr
            ));
        }
        Ok(())
    };
    std::fs::write(
        dir.join("ext.cnf"),
        "[ca]\nbasicConstraints=critical,CA:TRUE\n\
         [leaf]\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .map_err(|e| format!("write {}: {e}", dir.join("ext.cnf").display()))?;
    openssl(&[
        "req",
        "-x509",
        "-sha256",
        "-nodes",
        "-days",
        "2",
        "-newkey",
        "rsa:2048",
        "-keyout",
        "ca_0.key",
        "-out",
        "cert_0.pem",
        "-subj",
        "/O=artq interop root/",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
    ])?;
    let mut chain = Vec::new();
    for i in 1..=len {
        let (key, csr, cert) = (
            format!("ca_{i}.key"),
            format!("{i}.csr"),
            format!("cert_{i}.pem"),
        );
        let subject = if i == len {
            "/O=artq interop leaf/".to_string()
        } else {
            format!("/O=artq interop intermediate {i}/")
        };
        openssl(&[
            "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj",
            &subject,
        ])?;
        let (ca_cert, ca_key) = (format!("cert_{}.pem", i - 1), format!("ca_{}.key", i - 1));
        let section = if i == len { "leaf" } else { "ca" };
        openssl(&[
            "x509",
            "-req",
            "-sha256",
            "-days",
            "2",
            "-in",
            &csr,
            "-CA",
            &ca_cert,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-out",
            &cert,
            "-extfile",
            "ext.cnf",
            "-extensions",
            section,
        ])?;
        let pem = std::fs::read_to_string(dir.join(&cert))
            .map_err(|e| format!("read {}: {e}", dir.join(&cert).display()))?;
        chain.push(pem);
    }
    chain.reverse();
    let (cert_pem, key_pem) = (dir.join("cert.pem"), dir.join("priv.key"));
    std::fs::write(&cert_pem, chain.concat())
        .map_err(|e| format!("write {}: {e}", cert_pem.display()))?;
    std::fs::copy(dir.join(format!("ca_{len}.key")), &key_pem)
        .map_err(|e| format!("copy the leaf key to {}: {e}", key_pem.display()))?;
    Ok((cert_pem, key_pem))
}
