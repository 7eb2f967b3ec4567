//! The `hypercloud local-cloud` command line: `serve` runs the cloud in the foreground; the
//! operator commands (`instance`, `volume`, `status`) are API clients. When a server holds the
//! state directory they talk to it (its URL is in `<state-dir>/server.json`); otherwise they
//! start the cloud in-process on a free loopback port against the same state directory, run
//! the command through the same API, and stop it. Either way every change goes through the API
//! code and its checks, and is on disk when the command returns. `entra-certificate` is the
//! exception: Entra has no API for it here (upstream it is Microsoft Graph's), so it edits the
//! registry files the token endpoint reads ([`crate::api::azure::entra::certificates`]).
//! `gce-service-account-key` is an API client too (IAM's `keys.create` of the GCE dialect),
//! and so is `cloudstack-keys` (the CloudStack dialect's `getUserKeys`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::faults::{self, Faults, Latency, Rate};
use crate::server::SERVER_FILE;
use crate::{defaults, store, Error, Result, Server, ServerConfig, ServerHandle, TlsFiles};

mod args;
mod certificates;
mod client;
mod cloudstack_keys;
mod commands;
mod gce_keys;
mod serve;

pub use args::*;
use certificates::*;
use client::*;
use cloudstack_keys::*;
use commands::*;
use gce_keys::*;
use serve::*;

/// Runs `hypercloud local-cloud ...`.
pub async fn run(args: LocalCloudArgs) -> Result<()> {
    let LocalCloudArgs {
        state_dir,
        password,
        command,
    } = args;
    let state_dir = match state_dir {
        Some(d) => d,
        None => defaults::state_dir().ok_or(Error::NoHome)?,
    };
    match command {
        Command::Serve(serve_args) => serve(state_dir, password, serve_args).await,
        Command::Instance(cmd) => {
            let client = Client::connect(&state_dir, &password).await?;
            let result = instance(&client, cmd).await;
            client.close().await?;
            result
        }
        Command::Volume(cmd) => {
            let client = Client::connect(&state_dir, &password).await?;
            let result = volume(&client, cmd).await;
            client.close().await?;
            result
        }
        Command::Status(out) => status(&state_dir, &password, out).await,
        Command::EntraCertificate(cmd) => entra_certificate(&state_dir, cmd),
        Command::GceServiceAccountKey(cmd) => {
            let client = Client::connect(&state_dir, &password).await?;
            let result = gce_service_account_key(&client, cmd).await;
            client.close().await?;
            result
        }
        Command::CloudstackKeys(args) => {
            let client = Client::connect(&state_dir, &password).await?;
            let result = cloudstack_keys(&client, args).await;
            client.close().await?;
            result
        }
    }
}
