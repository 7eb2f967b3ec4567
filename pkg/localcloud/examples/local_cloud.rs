//! `cargo run -p hypercloud-localcloud --example local_cloud -- serve`: the local cloud's
//! command line without the rest of hypercloud (handy while developing this crate).

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: hypercloud_localcloud::LocalCloudArgs,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    match hypercloud_localcloud::run(Cli::parse().args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
