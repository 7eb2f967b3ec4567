//! `local-cloud gce-service-account-key`: IAM's `keys.create` and `keys.list` of the GCE
//! dialect ([`crate::api::gce`]), through the API as every operator command. `create` writes
//! the key file a client reads (`GOOGLE_APPLICATION_CREDENTIALS`, the gce provider's
//! `[Hypercloud] credentials-file`), owner-only, as `gcloud iam service-accounts keys create`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use super::*;

fn keys_path(project: &str, email: &str) -> String {
    format!("/iam/v1/projects/{project}/serviceAccounts/{email}/keys")
}

/// Writes `bytes` to `path`, readable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let err = |source| Error::WriteFile {
        path: path.to_owned(),
        source,
    };
    let mut f = options.open(path).map_err(err)?;
    f.write_all(bytes).map_err(err)?;
    f.sync_all().map_err(err)
}

pub(super) async fn gce_service_account_key(
    client: &Client,
    cmd: GceServiceAccountKeyCommand,
) -> Result<()> {
    match cmd {
        GceServiceAccountKeyCommand::Create {
            email,
            project,
            out,
            token_uri,
        } => {
            let path = keys_path(&project, &email);
            let key = client
                .call(
                    Method::POST,
                    &path,
                    Some(json!({"privateKeyType": "TYPE_GOOGLE_CREDENTIALS_FILE", "keyAlgorithm": "KEY_ALG_RSA_2048"})),
                )
                .await?;
            let bad = |what: &str| Error::Api {
                method: "POST",
                url: format!("{}{path}", client.base),
                status: 200,
                body: format!("the answer has no usable {what}"),
            };
            let data = key["privateKeyData"]
                .as_str()
                .and_then(|d| STANDARD.decode(d).ok())
                .ok_or_else(|| bad("privateKeyData"))?;
            let mut file: Value =
                serde_json::from_slice(&data).map_err(|_| bad("privateKeyData"))?;
            // An in-process server's port dies with this command: point the file at the
            // server that will run, unless told where.
            let token_uri = token_uri.or_else(|| {
                client
                    .local
                    .is_some()
                    .then(|| format!("http://{}/token", defaults::API_LISTEN))
            });
            if let Some(uri) = &token_uri {
                file["token_uri"] = json!(uri);
            }
            let text = serde_json::to_string_pretty(&file).map_err(|source| Error::Encode {
                what: "key file",
                source,
            })?;
            write_private(&out, text.as_bytes())?;
            println!(
                "created key {} for {email}: {} (token_uri {})",
                file["private_key_id"].as_str().unwrap_or_default(),
                out.display(),
                file["token_uri"].as_str().unwrap_or_default()
            );
            Ok(())
        }
        GceServiceAccountKeyCommand::List {
            email,
            project,
            output,
        } => {
            let keys = client
                .call(Method::GET, &keys_path(&project, &email), None)
                .await?;
            let list = keys["keys"].clone();
            print(output.output, &list, || {
                std::iter::once(vec!["KEY ID".to_owned(), "CREATED".to_owned()])
                    .chain(list.as_array().into_iter().flatten().map(|k| {
                        vec![
                            k["name"]
                                .as_str()
                                .and_then(|n| n.rsplit('/').next())
                                .unwrap_or_default()
                                .to_owned(),
                            k["validAfterTime"].as_str().unwrap_or_default().to_owned(),
                        ]
                    }))
                    .collect()
            });
            Ok(())
        }
    }
}
