//! What the aws provider's integration tests share: the cloud from hypercloud-testenv and a
//! provider configured for it.
#![allow(dead_code, unused_imports)]

use hypercloud_cloudprovider::CloudConfig;
use hypercloud_providers_aws::Aws;
pub use hypercloud_testenv::aws::{cloud_conf, Cloud as World, CLUSTER};
use serde_json::Value;

pub fn provider(conf: &str) -> Aws {
    Aws::from_cloud_config(Some(&CloudConfig {
        origin: "test.conf".into(),
        bytes: conf.as_bytes().to_vec(),
    }))
    .expect("valid config")
}

pub fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or_default()
}
