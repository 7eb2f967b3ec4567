//! The crate's one error type: each variant names the operation that failed. A variant's
//! message never repeats its cause: the cause is its `source()`, and printing the whole chain
//! is [`hypercloud_cloudprovider::Chain`]'s job.

use std::path::PathBuf;

/// Everything that can go wrong starting, running or talking to the local cloud.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create state directory {path}")]
    CreateStateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot lock state directory {path}")]
    LockStateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "state directory {path} is in use by another local-cloud server; stop it first \
         (or pick another --state-dir)"
    )]
    StateDirInUse { path: PathBuf },
    #[error("cannot read snapshot {path}")]
    ReadSnapshot {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("snapshot {path} is corrupt")]
    DecodeSnapshot {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot write snapshot {path}")]
    WriteSnapshot {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open write-ahead log {path}")]
    OpenLog {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("write-ahead log {path} is corrupt at record {record}: {reason}")]
    ReplayLog {
        path: PathBuf,
        record: u64,
        reason: String,
    },
    #[error("cannot append to write-ahead log {path}")]
    AppendLog {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot encode {what}")]
    Encode {
        what: &'static str,
        source: serde_json::Error,
    },
    #[error("cannot write config drive {path}")]
    WriteConfigDrive {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}")]
    WriteFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot load TLS material from {path}: {reason}")]
    LoadTls { path: PathBuf, reason: String },
    /// A certificate file given to register for an Entra client, or a registered one.
    #[error("client certificate {path} cannot be used: {reason}")]
    ClientCertificate { path: PathBuf, reason: String },
    /// Making the cloud's own CA or serving certificate (`--tls-self-signed`).
    #[error("cannot make TLS material {path}")]
    MakeTls { path: PathBuf, source: rcgen::Error },
    /// A file named by a flag (or by the running server's `server.json`) that is missing, not
    /// a regular file or over its limit; the error names the flag.
    #[error(transparent)]
    ReadInput(#[from] hypercloud_cloudprovider::input::InputFileError),
    #[error("cannot listen on {addr}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("server task failed: {0}")]
    Serve(String),
    #[error("invalid server configuration: {field}: {reason}")]
    InvalidConfig { field: &'static str, reason: String },
    #[error("invalid value {value:?} for {flag}: {reason}")]
    ParseFlag {
        flag: &'static str,
        value: String,
        reason: String,
    },
    #[error("request {method} {url} failed")]
    Request {
        method: &'static str,
        url: String,
        source: reqwest::Error,
    },
    #[error("reading the answer to {method} {url}")]
    ReadBody {
        method: &'static str,
        url: String,
        source: hypercloud_cloudprovider::http_body::BodyError,
    },
    /// `body` is an excerpt of the answer.
    #[error("{method} {url} answered {status}: {body}")]
    Api {
        method: &'static str,
        url: String,
        status: u16,
        body: String,
    },
    #[error("no {what} named or with ID {name:?}")]
    NotFound { what: &'static str, name: String },
    #[error("the HOME environment variable is not set; pass --state-dir")]
    NoHome,
    #[error("cannot wait for a shutdown signal")]
    Signal(#[source] std::io::Error),
}

/// Result with this crate's [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
