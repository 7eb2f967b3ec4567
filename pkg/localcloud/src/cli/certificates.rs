//! `local-cloud entra-certificate`: the certificates Entra clients sign in with, in the
//! registry the token endpoint reads (see [`crate::api::azure::entra::certificates`]).

use super::*;
use crate::api::azure::entra::certificates::{self, ClientCertificate};

fn row(client: &str, c: &ClientCertificate) -> Vec<String> {
    vec![
        crate::api::azure::guid(client),
        c.thumbprint(),
        c.x5t(),
        crate::time::iso(u64::try_from(c.not_after).unwrap_or(0)),
        c.subject.clone(),
    ]
}

fn json_of(client: &str, c: &ClientCertificate) -> Value {
    json!({
        "client_id": crate::api::azure::guid(client),
        "thumbprint": c.thumbprint(),
        "x5t": c.x5t(),
        "not_before": crate::time::iso(u64::try_from(c.not_before).unwrap_or(0)),
        "not_after": crate::time::iso(u64::try_from(c.not_after).unwrap_or(0)),
        "subject": c.subject,
    })
}

const HEADER: [&str; 5] = ["CLIENT ID", "THUMBPRINT", "X5T", "NOT AFTER", "SUBJECT"];

fn table(rows: impl Iterator<Item = Vec<String>>) -> Vec<Vec<String>> {
    std::iter::once(HEADER.iter().map(|h| (*h).to_owned()).collect())
        .chain(rows)
        .collect()
}

pub(super) fn entra_certificate(state_dir: &Path, cmd: EntraCertificateCommand) -> Result<()> {
    match cmd {
        EntraCertificateCommand::Add {
            client_id,
            file,
            output,
        } => {
            let added = certificates::add(state_dir, &client_id, &file)?;
            let key = certificates::client_key(&client_id).unwrap_or_default();
            let value: Vec<Value> = added
                .certificates
                .iter()
                .map(|(c, new)| {
                    let mut v = json_of(&key, c);
                    v["new"] = json!(new);
                    v
                })
                .collect();
            print(output.output, &Value::Array(value), || {
                table(added.certificates.iter().map(|(c, _)| row(&key, c)))
            });
            if added.left_out_private_key {
                eprintln!(
                    "entra-certificate: {} also holds a private key; only the certificate was kept",
                    file.display()
                );
            }
            Ok(())
        }
        EntraCertificateCommand::Remove {
            client_id,
            thumbprint,
        } => {
            let gone = certificates::remove(state_dir, &client_id, thumbprint.as_deref())?;
            if gone.is_empty() {
                return Err(Error::NotFound {
                    what: "registered certificate for client",
                    name: thumbprint.map_or(client_id.clone(), |t| format!("{client_id} {t}")),
                });
            }
            for c in gone {
                println!("removed {} ({})", c.thumbprint(), c.subject);
            }
            Ok(())
        }
        EntraCertificateCommand::List(output) => {
            let all = certificates::list(state_dir)?;
            let value: Vec<Value> = all.iter().map(|(k, c)| json_of(k, c)).collect();
            print(output.output, &Value::Array(value), || {
                table(all.iter().map(|(k, c)| row(k, c)))
            });
            Ok(())
        }
    }
}
