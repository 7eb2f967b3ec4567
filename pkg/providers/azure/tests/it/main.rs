//! Integration tests of the azure provider's Resource Manager client against the local
//! cloud's Azure dialect, started in process over TLS with a self-signed certificate (one test
//! binary, a module per concern), and against tiny servers that answer what the local cloud
//! never would (garbage from Entra, a scripted IMDS).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod arm;
mod disks;
mod faults;
mod instances;
mod loadbalancer;
mod support;
mod tokens;
