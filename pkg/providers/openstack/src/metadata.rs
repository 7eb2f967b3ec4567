//! Instance metadata for the node side (kubelet-helper): who am I, in which zone, which disks.
//! Sources are tried in `[Metadata] search-order`: the config drive (upstream mounts the
//! `config-2` block device read-only; here it is a directory, `[Metadata] config-drive-dir`),
//! then the metadata service (`http://169.254.169.254/openstack/latest/meta_data.json`, or
//! `[Metadata] metadata-url`). When every source fails the error names each attempt.
//! Upstream equivalent: legacy `pkg/cloudprovider/providers/openstack/metadata.go` and
//! cloud-provider-openstack's `pkg/util/metadata`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hypercloud_cloudprovider::http_body;
use hypercloud_cloudprovider::http_client::HttpClientConfig;
use serde::Deserialize;

use crate::config::{MetadataConfig, MetadataSource};
use crate::error::{Error, Result};

/// Versions of the metadata format, newest first, as upstream falls back through them.
const VERSIONS: [&str; 9] = [
    "latest",
    "2018-08-27",
    "2017-02-22",
    "2016-10-06",
    "2016-06-30",
    "2015-10-15",
    "2013-10-17",
    "2013-04-04",
    "2012-08-10",
];

/// The fields of `meta_data.json` hypercloud uses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Metadata {
    /// The instance (server) ID.
    pub uuid: String,
    /// The instance name: the node name.
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub hostname: String,
    #[serde(default)]
    pub availability_zone: String,
    #[serde(default)]
    pub devices: Vec<Device>,
}

/// A device of the instance (an attached volume, for example).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Device {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub bus: String,
    /// For disks, the Cinder volume ID.
    #[serde(default)]
    pub serial: String,
    #[serde(default)]
    pub address: String,
}

/// Reads instance metadata per `[Metadata]`.
/// The longest a connection to the metadata service may take.
const METADATA_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone, Debug)]
pub struct MetadataReader {
    config: MetadataConfig,
    http: reqwest::Client,
}

impl MetadataReader {
    /// A reader for `config`.
    pub fn new(config: MetadataConfig) -> Result<Self> {
        // The metadata service is link-local: a connection that is not made at once will not
        // be; the request timeout bounds the rest. It never redirects; a redirect is refused,
        // not followed.
        let http = HttpClientConfig::new(config.request_timeout, METADATA_CONNECT_TIMEOUT)
            .refuse_redirects()
            .build()?;
        Ok(MetadataReader { config, http })
    }

    /// The configuration in use.
    pub fn config(&self) -> &MetadataConfig {
        &self.config
    }

    /// Tries each source in `search-order`; the first that answers wins.
    pub async fn read(&self) -> Result<Metadata> {
        let mut attempts = Vec::new();
        for source in &self.config.search_order {
            let outcome = match source {
                MetadataSource::ConfigDrive => self.read_config_drive().await,
                MetadataSource::MetadataService => self.read_metadata_service().await,
            };
            match outcome {
                Ok(md) => {
                    tracing::debug!(source = source.name(), instance = %md.uuid, "read instance metadata");
                    return Ok(md);
                }
                Err(why) => {
                    tracing::debug!(source = source.name(), %why, "metadata source failed");
                    attempts.push(format!("{}: {why}", source.name()));
                }
            }
        }
        Err(Error::ReadMetadata { attempts })
    }

    async fn read_config_drive(&self) -> Result<Metadata, String> {
        let Some(dir) = &self.config.config_drive_dir else {
            let hint = if Path::new("/dev/disk/by-label/config-2").exists() {
                "a config-2 device exists, but mounting it is not supported"
            } else {
                "no device labelled config-2"
            };
            return Err(format!(
                "no [Metadata] config-drive-dir configured ({hint})"
            ));
        };
        let root = self.drive_root(dir)?;
        let mut tried = Vec::new();
        for version in VERSIONS {
            let path = root.join("openstack").join(version).join("meta_data.json");
            let read = path.clone();
            let bytes = tokio::task::spawn_blocking(move || {
                hypercloud_cloudprovider::input::read_input_file(&read)
            })
            .await
            .map_err(|e| format!("{}: {e}", path.display()))?;
            match bytes {
                Ok(bytes) => {
                    return parse(&bytes).map_err(|e| format!("{}: {e}", path.display()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => tried.push(version),
                Err(e) => return Err(format!("{}: {e}", path.display())),
            }
        }
        Err(format!(
            "no openstack/<version>/meta_data.json under {} (tried {})",
            root.display(),
            tried.join(", ")
        ))
    }

    /// The mounted drive itself, or `<dir>/<instance-id>` when the directory holds one drive
    /// per instance (the local cloud's layout), or its only drive.
    fn drive_root(&self, dir: &Path) -> Result<PathBuf, String> {
        if dir.join("openstack").is_dir() {
            return Ok(dir.to_path_buf());
        }
        if !dir.is_dir() {
            return Err(format!("{} is not a directory", dir.display()));
        }
        if let Some(id) = &self.config.instance_id {
            let root = dir.join(id);
            if root.join("openstack").is_dir() {
                return Ok(root);
            }
            return Err(format!(
                "no config drive for instance {id} in {}",
                dir.display()
            ));
        }
        let drives: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("openstack").is_dir())
            .collect();
        match drives.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(format!("no config drive in {}", dir.display())),
            _ => Err(format!(
                "{} config drives in {}; set [Metadata] instance-id to pick one",
                drives.len(),
                dir.display()
            )),
        }
    }

    async fn read_metadata_service(&self) -> Result<Metadata, String> {
        let base = self.config.metadata_url.trim_end_matches('/');
        let url = format!("{base}/openstack/latest/meta_data.json");
        let mut req = self.http.get(&url);
        if let Some(id) = &self.config.instance_id {
            req = req.header("x-instance-id", id);
        }
        let resp = req.send().await.map_err(|e| format!("GET {url}: {e}"))?;
        let status = resp.status();
        let api = "the OpenStack metadata service";
        let location = resp.headers().get(reqwest::header::LOCATION);
        http_body::refuse_redirect(status.as_u16(), location.map(|l| l.as_bytes()), api, &url)
            .map_err(|e| e.to_string())?;
        if !status.is_success() {
            let (prefix, _) = http_body::read_prefix(reqwest::Body::from(resp)).await;
            return Err(format!(
                "GET {url}: HTTP {}: {}",
                status.as_u16(),
                http_body::excerpt(&prefix)
            ));
        }
        // As for a config drive's file: at most 1 MiB, however much the service sends.
        let bytes = http_body::read_limited(
            reqwest::Body::from(resp),
            http_body::METADATA_LIMIT,
            api,
            &format!("GET {url}"),
        )
        .await
        .map_err(|e| hypercloud_cloudprovider::Chain(&e).to_string())?;
        parse(&bytes).map_err(|e| format!("GET {url}: {e}"))
    }
}

fn parse(bytes: &[u8]) -> Result<Metadata, String> {
    let md: Metadata = serde_json::from_slice(bytes).map_err(|e| {
        format!(
            "invalid meta_data.json: {}",
            http_body::excerpt_str(&e.to_string())
        )
    })?;
    if md.uuid.is_empty() {
        return Err("meta_data.json has no uuid".into());
    }
    Ok(md)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_fields_upstream_uses() {
        let md = parse(br#"{"uuid":"u-1","name":"node-1","hostname":"node-1.novalocal","availability_zone":"az1","launch_index":0,
            "devices":[{"type":"disk","bus":"virtio","serial":"vol-1","address":"0000:00:06.0","tags":[]}]}"#).unwrap();
        assert_eq!(md.uuid, "u-1");
        assert_eq!(md.name, "node-1");
        assert_eq!(md.hostname, "node-1.novalocal");
        assert_eq!(md.availability_zone, "az1");
        assert_eq!(md.devices[0].serial, "vol-1");
        assert_eq!(md.devices[0].bus, "virtio");
        assert!(parse(b"{}").is_err());
        assert!(parse(b"not json").is_err());
    }

    #[tokio::test]
    async fn old_versions_are_a_fallback_and_failures_name_every_source() {
        let dir = tempfile::tempdir().unwrap();
        let v = dir.path().join("openstack/2015-10-15");
        std::fs::create_dir_all(&v).unwrap();
        std::fs::write(v.join("meta_data.json"), br#"{"uuid":"old"}"#).unwrap();
        let reader = MetadataReader::new(MetadataConfig {
            config_drive_dir: Some(dir.path().into()),
            // Nothing listens on port 1.
            metadata_url: "http://127.0.0.1:1".into(),
            ..MetadataConfig::default()
        })
        .unwrap();
        assert_eq!(reader.read().await.unwrap().uuid, "old");

        let empty = tempfile::tempdir().unwrap();
        let reader = MetadataReader::new(MetadataConfig {
            config_drive_dir: Some(empty.path().into()),
            metadata_url: "http://127.0.0.1:1".into(),
            ..MetadataConfig::default()
        })
        .unwrap();
        let msg = reader.read().await.unwrap_err().to_string();
        assert!(msg.contains("configDrive: no config drive in"), "{msg}");
        assert!(
            msg.contains("metadataService: GET http://127.0.0.1:1/openstack/latest/meta_data.json"),
            "{msg}"
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;
        use serde_json::{json, Value};

        /// A JSON value of any type, with extreme numbers: what a field may be mutated to.
        fn any_json() -> impl Strategy<Value = Value> {
            prop_oneof![
                "[ -~]{0,20}".prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                any::<u64>().prop_map(Value::from),
                any::<f64>().prop_map(|f| json!(f)),
                Just(json!(1e308)),
                any::<bool>().prop_map(Value::from),
                Just(Value::Null),
                Just(json!([1, "a"])),
                Just(json!({"k": -1})),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]

            /// meta_data.json with any field replaced by any type: parsed or refused with
            /// a message naming the document, never a panic; a mistyped field of ours is
            /// named in the error.
            #[test]
            fn mutated_meta_data_never_panics(
                field in prop::sample::select(&["uuid", "name", "hostname", "availability_zone", "devices", "launch_index", "meta"][..]),
                value in any_json(),
                device_field in prop::sample::select(&["type", "bus", "serial", "address", "tags"][..]),
                device_value in any_json(),
            ) {
                let mut md = json!({"uuid": "u-1", "name": "n", "hostname": "n.novalocal", "availability_zone": "az1",
                    "launch_index": 0, "devices": [{"type": "disk", "bus": "virtio", "serial": "vol-1", "address": "0000:00:06.0", "tags": []}]});
                md["devices"][0][device_field] = device_value.clone();
                md[field] = value.clone();
                let bytes = serde_json::to_vec(&md).expect("json");
                match parse(&bytes) {
                    Ok(m) => prop_assert!(!m.uuid.is_empty()),
                    Err(e) => {
                        prop_assert!(e.contains("meta_data.json"), "{e}");
                        if e.contains("invalid type") && !["launch_index", "meta"].contains(&field) {
                            // serde_json names the position, not the key; our wrapper names the document.
                            prop_assert!(e.starts_with("invalid meta_data.json"), "{e}");
                        }
                    }
                }
            }

            /// Arbitrary bytes: never a panic.
            #[test]
            fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
                let _ = parse(&bytes);
            }
        }
    }
}
