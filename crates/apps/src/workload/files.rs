//! The files workload: `files` files of `size` bytes fetched one after
//! another over one connection (ART journal Figs. 20-21 fetch 1000 files;
//! a bulk transfer is one file). File contents are generated
//! ([`crate::content::FileContent`]) and every byte is checked by the
//! client.

use super::{ClientReport, Workload, WorkloadKind, WorkloadOptions, MAX_FILES};
use crate::app::{App, Host};
use crate::content::GeneratedFiles;
use crate::files::{FilesClient, Paths, VerifySink};
use crate::protocol::Protocol;
use crate::server::{HttpServer, ServerOptions};

/// The files workload's numbers ([`Workload::Files`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilesWorkload {
    /// Number of files, fetched one after another (at least 1).
    pub files: u64,
    /// Size of each file, bytes.
    pub size: u64,
}

/// The workload of the keys `files` (default 1) and `size` (required).
pub(super) fn parse(o: &WorkloadOptions) -> Result<Workload, String> {
    let size = o
        .size
        .ok_or("the files workload needs `size` (bytes, or with a unit: \"10MB\")")?;
    Ok(Workload::files(o.files.unwrap_or(1), size))
}

impl WorkloadKind for FilesWorkload {
    fn name(&self) -> &'static str {
        "files"
    }

    fn items(&self) -> u64 {
        self.files
    }

    fn total_bytes(&self) -> u64 {
        self.files.saturating_mul(self.size)
    }

    /// At least one file, at most [`MAX_FILES`], and a size that fits a
    /// QUIC stream.
    fn validate(&self) -> Result<(), String> {
        let FilesWorkload { files, size } = *self;
        if files == 0 {
            return Err("the workload needs at least one file".into());
        }
        if files > MAX_FILES {
            return Err(format!(
                "{files} files is more than the {MAX_FILES} a workload may hold"
            ));
        }
        // RFC 9000 §19.8: stream offsets stay below 2^62.
        if size >= 1 << 62 {
            return Err(format!(
                "file size {size} bytes exceeds a QUIC stream's 2^62 bytes"
            ));
        }
        Ok(())
    }

    fn server_app(&self, content_seed: u64) -> Box<dyn App> {
        let content = GeneratedFiles {
            seed: content_seed,
            files: self.files,
            size: self.size,
        };
        Box::new(HttpServer::new(Box::new(content), ServerOptions::default()))
    }

    fn client_app(&self, content_seed: u64, protocol: Protocol) -> Result<Box<dyn App>, String> {
        let client = FilesClient::new(
            protocol,
            Some("localhost".into()),
            Paths::Indexed(self.files),
            Box::new(VerifySink::new(content_seed, self.size)),
        );
        Ok(Box::new(client))
    }

    fn client_report(&self, host: &Host) -> Option<ClientReport> {
        super::files_client_report(host, |_| None)
    }

    fn options(&self) -> WorkloadOptions {
        WorkloadOptions {
            files: Some(self.files),
            size: Some(self.size),
            ..WorkloadOptions::default()
        }
    }
}
