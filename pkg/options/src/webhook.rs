//! The cloud-controller-manager's webhook flags (upstream k8s.io/cloud-provider
//! `options/webhook.go`: `WebhookOptions` and `WebhookServingOptions`): which provider
//! webhooks run and where they are served. Only the cloud-controller-manager has them.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Args;

/// Upstream `CloudControllerManagerWebhookPort`.
pub const WEBHOOK_PORT: u16 = 10260;

/// Upstream's pair name of the self-signed webhook certificate (`<name>.crt`/`.key` in
/// `--webhook-cert-dir`).
pub const WEBHOOK_PAIR_NAME: &str = "cloud-controller-manager-webhook";

/// `--webhooks` (upstream `WebhookOptions`).
#[derive(Args, Clone, Debug, Default, PartialEq)]
#[command(next_help_heading = "Webhook flags")]
pub struct WebhookOptions {
    /// A list of webhooks to enable. '*' enables all on-by-default webhooks, 'foo' enables
    /// the webhook named 'foo', '-foo' disables the webhook named 'foo'. The webhooks are the
    /// provider's (every provider with load balancers: service-lb-annotations, on by default); empty (the
    /// default, as upstream) serves none.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub webhooks: Vec<String>,
}

/// Where the webhooks are served (upstream `WebhookServingOptions`).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Webhook serving flags")]
pub struct WebhookServingOptions {
    /// The IP address on which to listen for the --webhook-secure-port port. The associated
    /// interface(s) must be reachable by the rest of the cluster, and by CLI/web clients. If
    /// set to an unspecified address (0.0.0.0 or ::), all interfaces will be used.
    #[arg(
        long = "webhook-bind-address",
        value_name = "IP",
        default_value = "0.0.0.0"
    )]
    pub webhook_bind_address: IpAddr,

    /// Secure port to serve cloud provider webhooks. If 0, don't serve webhooks at all.
    #[arg(long = "webhook-secure-port", value_name = "PORT", default_value_t = WEBHOOK_PORT)]
    pub webhook_secure_port: u16,

    /// The directory where the TLS certs are located. If --webhook-tls-cert-file and
    /// --webhook-tls-private-key-file are provided, this flag will be ignored.
    #[arg(long = "webhook-cert-dir", value_name = "DIR")]
    pub webhook_cert_dir: Option<PathBuf>,

    /// File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated
    /// after server cert). If --webhook-tls-cert-file and --webhook-tls-private-key-file are
    /// not provided, a self-signed certificate and key are generated for localhost and
    /// 127.0.0.1 and saved to the directory specified by --webhook-cert-dir.
    #[arg(
        long = "webhook-tls-cert-file",
        value_name = "FILE",
        requires = "webhook_tls_private_key_file"
    )]
    pub webhook_tls_cert_file: Option<PathBuf>,

    /// File containing the default x509 private key matching --webhook-tls-cert-file.
    #[arg(
        long = "webhook-tls-private-key-file",
        value_name = "FILE",
        requires = "webhook_tls_cert_file"
    )]
    pub webhook_tls_private_key_file: Option<PathBuf>,
}

/// Both webhook groups, as the cloud-controller-manager flattens them.
#[derive(Args, Clone, Debug, PartialEq)]
pub struct CloudWebhookOptions {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub webhook: WebhookOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub serving: WebhookServingOptions,
}

impl CloudWebhookOptions {
    /// Upstream's cross-flag check: the webhook port cannot be the admin server's.
    pub fn validate(&self, secure_port: u16) -> crate::Result<()> {
        if self.serving.webhook_secure_port != 0 && self.serving.webhook_secure_port == secure_port
        {
            return Err(crate::Error::InvalidFlag {
                flag: "--webhook-secure-port",
                message: "cannot be the same value as --secure-port".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser, Debug)]
    struct T {
        #[command(flatten)]
        w: CloudWebhookOptions,
    }

    #[test]
    fn clap_definition_is_consistent() {
        T::command().debug_assert();
    }

    #[test]
    fn defaults_are_upstream() {
        let t = T::try_parse_from(["t"]).expect("parse");
        assert!(t.w.webhook.webhooks.is_empty());
        assert_eq!(t.w.serving.webhook_secure_port, 10260);
        assert_eq!(t.w.serving.webhook_bind_address.to_string(), "0.0.0.0");
        assert_eq!(t.w.serving.webhook_cert_dir, None);
        t.w.validate(10258).expect("valid");
    }

    #[test]
    fn lists_ports_and_pairs() {
        let t = T::try_parse_from(["t", "--webhooks=*,-foo", "--webhook-secure-port=0"])
            .expect("parse");
        assert_eq!(t.w.webhook.webhooks, ["*", "-foo"]);
        t.w.validate(0).expect("both off is fine");
        let t = T::try_parse_from(["t", "--webhook-secure-port=10258"]).expect("parse");
        assert_eq!(
            t.w.validate(10258).expect_err("same port").to_string(),
            "--webhook-secure-port: cannot be the same value as --secure-port"
        );
        assert!(T::try_parse_from(["t", "--webhook-secure-port=65536"]).is_err());
        assert!(T::try_parse_from(["t", "--webhook-tls-cert-file=/x"]).is_err());
        assert!(T::try_parse_from(["t", "--webhook-bind-address=nowhere"]).is_err());
    }
}
