//! The aws provider's `--cloud-config`: upstream's INI file (`[Global]` and
//! `[ServiceOverride "N"]`, read by gcfg in the legacy `aws.go` and in cloud-provider-aws
//! `pkg/providers/v1/config`), plus hypercloud's own `[Hypercloud]` tuning keys.
//!
//! Unknown sections and keys, and upstream keys hypercloud does not implement, are start-up
//! warnings naming them (kept in [`Config::warnings`]); bad values and out-of-range numbers are
//! errors naming the line and key.

use std::time::Duration;

use hypercloud_cloudprovider::gcfg;

use crate::error::{Error, Result};

/// Which addresses of an instance a Node gets, in this order (`NodeIPFamilies`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpFamily {
    /// Private IPv4 addresses (and the public IPv4 as ExternalIP).
    Ipv4,
    /// IPv6 addresses of the network interfaces (as InternalIP, as upstream).
    Ipv6,
}

/// `[Global]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Global {
    /// The zone this cluster runs in; its region (the zone minus its last letter) is the
    /// region the provider talks to. Empty: from instance metadata, then the SDK's region chain.
    pub zone: Option<String>,
    /// The VPC of the cluster's load balancers and security groups.
    pub vpc: Option<String>,
    /// The subnet load balancers are placed in (otherwise found by cluster/role tags).
    pub subnet_id: Option<String>,
    /// The route table pod routes go to (otherwise found by the cluster tag).
    pub route_table_id: Option<String>,
    /// The legacy `KubernetesCluster` tag value.
    pub kubernetes_cluster_tag: Option<String>,
    /// The cluster ID: resources tagged `kubernetes.io/cluster/<ID>`.
    pub kubernetes_cluster_id: Option<String>,
    /// Do not add ingress rules for load balancers to the nodes' security groups.
    pub disable_security_group_ingress: bool,
    /// One security group for every classic ELB instead of one per ELB.
    pub elb_security_group: Option<String>,
    /// Default `[ipv4]`.
    pub node_ip_families: Vec<IpFamily>,
    /// Accepted as upstream; hypercloud has no zone-name check to disable.
    pub disable_strict_zone_check: bool,
    /// `RoleARN`: every call is made with this role's credentials, assumed through STS
    /// (`AssumeRole`) with the default chain's credentials and renewed before they expire.
    pub role_arn: Option<RoleArn>,
    /// `SourceARN`: sent with the `AssumeRole` request as `x-amz-source-arn` (the role's
    /// account always goes as `x-amz-source-account`), for the role trust policy's
    /// `aws:SourceArn` and `aws:SourceAccount` conditions.
    pub source_arn: Option<String>,
}

/// A role's ARN, `arn:<partition>:iam::<account>:role/<name>`, as parsed from `RoleARN`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleArn {
    /// The whole ARN.
    pub arn: String,
    /// Its account ID (12 digits).
    pub account: String,
}

impl RoleArn {
    /// Parses `arn:<partition>:iam::<account>:role/<path/name>`; the error says what is wrong.
    pub fn parse(s: &str) -> std::result::Result<RoleArn, String> {
        let parts: Vec<&str> = s.splitn(6, ':').collect();
        let [arn, partition, service, region, account, resource] = parts[..] else {
            return Err(format!(
                "{s:?} is not an ARN (arn:<partition>:iam::<account>:role/<name>)"
            ));
        };
        if arn != "arn" || partition.is_empty() {
            return Err(format!(
                "{s:?} is not an ARN (it must start with arn:<partition>:)"
            ));
        }
        if service != "iam" || !region.is_empty() || !resource.starts_with("role/") {
            return Err(format!(
                "{s:?} is not an IAM role's ARN (arn:<partition>:iam::<account>:role/<name>)"
            ));
        }
        if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{s:?}: the account {account:?} is not 12 digits"));
        }
        if resource.len() <= "role/".len() {
            return Err(format!("{s:?}: the role has no name"));
        }
        Ok(RoleArn {
            arn: s.to_owned(),
            account: account.to_owned(),
        })
    }
}

impl Default for Global {
    fn default() -> Self {
        Global {
            zone: None,
            vpc: None,
            subnet_id: None,
            route_table_id: None,
            kubernetes_cluster_tag: None,
            kubernetes_cluster_id: None,
            disable_security_group_ingress: false,
            elb_security_group: None,
            node_ip_families: vec![IpFamily::Ipv4],
            disable_strict_zone_check: false,
            role_arn: None,
            source_arn: None,
        }
    }
}

/// One `[ServiceOverride "N"]`: a custom endpoint for one service in one region.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceOverride {
    /// The section's name (`"N"`), for messages.
    pub name: String,
    /// `ec2` or `elasticloadbalancing` (the latter for both ELB and ELBv2, as upstream).
    pub service: String,
    /// The region the override applies to.
    pub region: String,
    /// The endpoint URL.
    pub url: String,
    /// The region requests are signed for (default: `region`).
    pub signing_region: Option<String>,
    /// Signing method; only SigV4 (`v4` or empty) is supported.
    pub signing_method: Option<String>,
    /// Signing name; only the service's own is supported.
    pub signing_name: Option<String>,
}

/// The IMDS address on a real instance.
pub const DEFAULT_METADATA_ENDPOINT: &str = "http://169.254.169.254";

/// `[Hypercloud]`: tuning that upstream does not have.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    /// How long one `DescribeInstances` listing answers look-ups for every node (default 5s;
    /// 0 to 10m).
    pub instance_cache_ttl: Duration,
    /// The instance metadata service (default `http://169.254.169.254`); also used by the
    /// credential chain's instance-role step.
    pub metadata_endpoint: String,
    /// Attempts per AWS request, throttling included (1 to 20). Unset: the SDK's own retry
    /// config (`AWS_MAX_ATTEMPTS`, the profile's `max_attempts`, else 3). The SDK's standard
    /// retry mode backs off exponentially with jitter.
    pub max_attempts: Option<u32>,
    /// Timeout of one metadata request (default 5s; 100ms to 1m).
    pub metadata_timeout: Duration,
    /// Multiplies every pause of the EBS waits (upstream's: 5s before a new volume is looked
    /// at, 2s/5s before an attachment, then their back-offs); default 1, 0.001 to 10. A
    /// simulator that answers at once (moto) needs no real-AWS pauses.
    pub volume_wait_scale: f64,
    /// `assume-role-duration`: the `DurationSeconds` of `RoleARN`'s `AssumeRole` (1s to 12h;
    /// real STS takes 15m to 12h). Unset: not sent, so STS's default of one hour, as upstream.
    pub assume_role_duration: Option<Duration>,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            instance_cache_ttl: Duration::from_secs(5),
            metadata_endpoint: DEFAULT_METADATA_ENDPOINT.into(),
            max_attempts: None,
            metadata_timeout: Duration::from_secs(5),
            volume_wait_scale: 1.0,
            assume_role_duration: None,
        }
    }
}

/// A parsed aws cloud config.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    /// `[Global]`.
    pub global: Global,
    /// `[ServiceOverride "N"]`, in file order.
    pub service_overrides: Vec<ServiceOverride>,
    /// `[Hypercloud]`.
    pub tuning: Tuning,
    /// Where the config came from, for messages.
    pub origin: String,
    /// Warnings logged while parsing (unknown or unimplemented keys and sections).
    pub warnings: Vec<String>,
}

/// Services whose endpoints this provider calls.
pub const SERVICE_EC2: &str = "ec2";
/// STS, called for `RoleARN`'s `AssumeRole`.
pub const SERVICE_STS: &str = "sts";
/// Classic ELB and ELBv2 (NLB) share this service name in overrides, as upstream.
pub const SERVICE_ELB: &str = "elasticloadbalancing";

/// Upstream keys that are understood but not implemented: a warning names them.
const UNIMPLEMENTED_GLOBAL: &[&str] = &[
    "clusterserviceloadbalancerhealthprobemode",
    "clusterservicesharedloadbalancerhealthprobeport",
    "clusterservicesharedloadbalancerhealthprobepath",
];

impl Config {
    /// Parses the file; warnings are logged and kept. See [`Config::validate`] for the checks
    /// across keys (run by the provider's factory).
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let file = gcfg::parse(text).map_err(|message| Error::ParseCloudConfig {
            origin: origin.into(),
            message,
        })?;
        let mut cfg = Config {
            origin: origin.into(),
            ..Config::default()
        };
        let mut families: Vec<IpFamily> = Vec::new();
        for s in &file.sections {
            let known = ["global", "serviceoverride", "hypercloud"]
                .contains(&s.name.to_ascii_lowercase().as_str());
            if !known {
                cfg.warn(format!(
                    "{origin}: line {}: unknown section [{}] ignored",
                    s.line, s.name
                ));
            } else if s.name.eq_ignore_ascii_case("serviceoverride") {
                let name = s.subsection.clone().unwrap_or_default();
                if !cfg.service_overrides.iter().any(|o| o.name == name) {
                    cfg.service_overrides.push(ServiceOverride {
                        name,
                        ..Default::default()
                    });
                }
            }
        }
        for e in &file.entries {
            let err = |m: String| Error::ParseCloudConfig {
                origin: origin.into(),
                message: format!("line {}: {} {}: {m}", e.line, title(e), e.key),
            };
            let v = e.value.clone().unwrap_or_default();
            let some = || (!v.is_empty()).then(|| v.clone());
            let key = e.key_lower();
            match (e.section.as_str(), key.as_str()) {
                ("global", "zone") => cfg.global.zone = some(),
                ("global", "vpc") => cfg.global.vpc = some(),
                ("global", "subnetid") => cfg.global.subnet_id = some(),
                ("global", "routetableid") => cfg.global.route_table_id = some(),
                ("global", "kubernetesclustertag") => cfg.global.kubernetes_cluster_tag = some(),
                ("global", "kubernetesclusterid") => cfg.global.kubernetes_cluster_id = some(),
                ("global", "disablesecuritygroupingress") => {
                    cfg.global.disable_security_group_ingress =
                        gcfg::parse_bool(e.value.as_deref()).map_err(err)?
                }
                ("global", "elbsecuritygroup") => cfg.global.elb_security_group = some(),
                ("global", "rolearn") => {
                    cfg.global.role_arn = some()
                        .map(|v| RoleArn::parse(v.trim()))
                        .transpose()
                        .map_err(err)?
                }
                ("global", "sourcearn") => cfg.global.source_arn = some().map(|v| v.trim().to_owned()),
                ("global", "disablestrictzonecheck") => {
                    cfg.global.disable_strict_zone_check =
                        gcfg::parse_bool(e.value.as_deref()).map_err(err)?
                }
                ("global", "nodeipfamilies") => {
                    // gcfg multi-value key: one family per line; a comma list is accepted too.
                    for f in v.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                        let fam = match f.to_ascii_lowercase().as_str() {
                            "ipv4" => IpFamily::Ipv4,
                            "ipv6" => IpFamily::Ipv6,
                            other => {
                                return Err(err(format!("{other:?} is not ipv4 or ipv6")))
                            }
                        };
                        if !families.contains(&fam) {
                            families.push(fam);
                        }
                    }
                }
                ("global", k) if UNIMPLEMENTED_GLOBAL.contains(&k) => cfg.warn(format!(
                    "{origin}: line {}: [Global] {} is not implemented by hypercloud and is ignored",
                    e.line, e.key
                )),
                ("serviceoverride", k) => {
                    let name = e.subsection.clone().unwrap_or_default();
                    let o = cfg
                        .service_overrides
                        .iter_mut()
                        .find(|o| o.name == name)
                        .ok_or_else(|| err("no such section".into()))?;
                    match k {
                        "service" => o.service = v.trim().to_ascii_lowercase(),
                        "region" => o.region = v.trim().into(),
                        "url" => o.url = v.trim().trim_end_matches('/').into(),
                        "signingregion" => o.signing_region = some(),
                        "signingmethod" => o.signing_method = some(),
                        "signingname" => o.signing_name = some(),
                        _ => cfg.warn(format!(
                            "{origin}: line {}: unknown key {:?} in {} ignored",
                            e.line,
                            e.key,
                            title(e)
                        )),
                    }
                }
                ("hypercloud", "instance-cache-ttl") => {
                    cfg.tuning.instance_cache_ttl =
                        duration_in(&v, Duration::ZERO, Duration::from_secs(600)).map_err(err)?
                }
                ("hypercloud", "metadata-endpoint") => {
                    let url = v.trim().trim_end_matches('/');
                    if !(url.starts_with("http://") || url.starts_with("https://")) {
                        return Err(err(format!("{url:?} is not an http(s) URL")));
                    }
                    cfg.tuning.metadata_endpoint = url.into();
                }
                ("hypercloud", "metadata-timeout") => {
                    cfg.tuning.metadata_timeout =
                        duration_in(&v, Duration::from_millis(100), Duration::from_secs(60))
                            .map_err(err)?
                }
                ("hypercloud", "volume-wait-scale") => {
                    let f: f64 = v
                        .trim()
                        .parse()
                        .map_err(|_| err(format!("{v:?} is not a number")))?;
                    if !(0.001..=10.0).contains(&f) {
                        return Err(err(format!("{v:?} is out of range (0.001 to 10)")));
                    }
                    cfg.tuning.volume_wait_scale = f;
                }
                ("hypercloud", "assume-role-duration") => {
                    cfg.tuning.assume_role_duration = Some(
                        duration_in(&v, Duration::from_secs(1), Duration::from_secs(12 * 3600))
                            .map_err(err)?,
                    )
                }
                ("hypercloud", "max-attempts") => {
                    let n: u32 = v
                        .trim()
                        .parse()
                        .map_err(|_| err(format!("{v:?} is not a whole number")))?;
                    if !(1..=20).contains(&n) {
                        return Err(err(format!("{n} is out of range (1 to 20)")));
                    }
                    cfg.tuning.max_attempts = Some(n);
                }
                ("global" | "hypercloud", _) => cfg.warn(format!(
                    "{origin}: line {}: unknown key {:?} in {} ignored",
                    e.line,
                    e.key,
                    title(e)
                )),
                _ => {} // in an unknown section, already warned about
            }
        }
        if !families.is_empty() {
            cfg.global.node_ip_families = families;
        }
        Ok(cfg)
    }

    fn warn(&mut self, message: String) {
        tracing::warn!("{message}");
        self.warnings.push(message);
    }

    /// Checks across keys: every override complete and of a supported kind; warns about
    /// overrides for services this provider never calls.
    pub fn validate(&mut self) -> Result<()> {
        let origin = self.origin.clone();
        let err = |message: String| Error::ParseCloudConfig {
            origin: origin.clone(),
            message,
        };
        let mut warnings = Vec::new();
        if let Some(src) = &self.global.source_arn {
            // It goes into a request header: nothing a header cannot carry.
            if src.chars().any(|c| c.is_control() || !c.is_ascii()) {
                return Err(err(format!(
                    "[Global] SourceARN {src:?} has a control or non-ASCII character"
                )));
            }
            if self.global.role_arn.is_none() {
                warnings.push(format!(
                    "{origin}: [Global] SourceARN is sent only when assuming RoleARN, which is not set; ignored"
                ));
            }
        }
        for o in &self.service_overrides {
            let t = format!("[ServiceOverride {:?}]", o.name);
            for (key, v) in [
                ("Service", &o.service),
                ("Region", &o.region),
                ("URL", &o.url),
            ] {
                if v.is_empty() {
                    return Err(err(format!("{t}: {key} is required")));
                }
            }
            // Signing puts the region in a header and the URL in the request line; the SDK
            // panics on a control character in either.
            for (key, v) in [
                ("Service", Some(&o.service)),
                ("Region", Some(&o.region)),
                ("URL", Some(&o.url)),
                ("SigningRegion", o.signing_region.as_ref()),
            ] {
                if v.is_some_and(|v| v.chars().any(|c| c.is_control() || c == ' ')) {
                    return Err(err(format!("{t}: {key} has a space or control character")));
                }
            }
            if !(o.url.starts_with("http://") || o.url.starts_with("https://")) {
                return Err(err(format!("{t}: URL {:?} is not an http(s) URL", o.url)));
            }
            if let Some(m) = o.signing_method.as_deref() {
                if !m.eq_ignore_ascii_case("v4") {
                    return Err(err(format!(
                        "{t}: SigningMethod {m:?} is not supported (only v4)"
                    )));
                }
            }
            if ![SERVICE_EC2, SERVICE_ELB, SERVICE_STS].contains(&o.service.as_str()) {
                warnings.push(format!(
                    "{origin}: {t}: Service={} is not called by hypercloud's aws provider; ignored",
                    o.service
                ));
            }
            if let Some(n) = o.signing_name.as_deref() {
                if n != o.service {
                    warnings.push(format!(
                        "{origin}: {t}: SigningName={n} is not implemented (requests are signed as {}); ignored",
                        o.service
                    ));
                }
            }
            let dup = self
                .service_overrides
                .iter()
                .filter(|p| p.service == o.service && p.region == o.region)
                .count();
            if dup > 1 {
                return Err(err(format!(
                    "{t}: more than one override for service {} in region {}",
                    o.service, o.region
                )));
            }
        }
        for w in warnings {
            self.warn(w);
        }
        Ok(())
    }

    /// The override for `service` in `region`, if any.
    pub fn override_for(&self, service: &str, region: &str) -> Option<&ServiceOverride> {
        self.service_overrides
            .iter()
            .find(|o| o.service == service && o.region == region)
    }

    /// The cluster ID as upstream: `KubernetesClusterID`, else the legacy `KubernetesClusterTag`.
    pub fn cluster_id(&self) -> Option<&str> {
        self.global
            .kubernetes_cluster_id
            .as_deref()
            .or(self.global.kubernetes_cluster_tag.as_deref())
    }
}

fn title(e: &gcfg::Entry) -> String {
    let written = match e.section.as_str() {
        "global" => "Global",
        "serviceoverride" => "ServiceOverride",
        "hypercloud" => "Hypercloud",
        other => other,
    };
    e.section_title(written)
}

/// The region of a zone: `us-east-1a` → `us-east-1` (upstream `azToRegion`; local zones such
/// as `us-west-2-lax-1a` keep their parent region's prefix).
pub fn zone_to_region(zone: &str) -> Option<String> {
    let zone = zone.trim();
    if zone.len() < 2 {
        return None;
    }
    if let Some(i) = zone.match_indices('-').nth(2).map(|(i, _)| i) {
        // Local Zone / Wavelength: region-az-... → the first three parts are the region.
        if zone[i + 1..].chars().any(|c| c.is_ascii_digit()) && zone.matches('-').count() > 2 {
            return Some(zone[..i].to_owned());
        }
    }
    let last = zone.chars().last()?;
    last.is_ascii_alphabetic()
        .then(|| zone[..zone.len() - 1].to_owned())
}

/// Go-style duration (`5s`, `500ms`, `1m30s`; a bare number is seconds) within `[min, max]`
/// (the kit's parser, as every provider's config).
fn duration_in(v: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    hypercloud_cloudprovider::duration::parse_in(v, min, max)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const UPSTREAM: &str = r#"
[Global]
Zone = us-east-1a
VPC = vpc-123
SubnetID = subnet-1
RouteTableID = rtb-1
KubernetesClusterID = demo
DisableSecurityGroupIngress = true
ElbSecurityGroup = sg-elb
NodeIPFamilies = ipv4
NodeIPFamilies = ipv6
RoleARN = arn:aws:iam::123456789012:role/x
SourceARN = arn:aws:eks:us-east-1:123456789012:cluster/demo

[ServiceOverride "1"]
Service = ec2
Region = us-east-1
URL = http://127.0.0.1:5000/
SigningRegion = us-east-1

[ServiceOverride "2"]
Service = elasticloadbalancing
Region = us-east-1
URL = http://127.0.0.1:5000
"#;

    #[test]
    fn upstream_keys() {
        let mut c = Config::parse(UPSTREAM, "t.conf").unwrap();
        c.validate().unwrap();
        let g = &c.global;
        assert_eq!(g.zone.as_deref(), Some("us-east-1a"));
        assert_eq!(g.vpc.as_deref(), Some("vpc-123"));
        assert_eq!(g.subnet_id.as_deref(), Some("subnet-1"));
        assert_eq!(g.route_table_id.as_deref(), Some("rtb-1"));
        assert_eq!(c.cluster_id(), Some("demo"));
        assert!(g.disable_security_group_ingress);
        assert_eq!(g.elb_security_group.as_deref(), Some("sg-elb"));
        assert_eq!(g.node_ip_families, vec![IpFamily::Ipv4, IpFamily::Ipv6]);
        assert_eq!(c.service_overrides.len(), 2);
        let o = c.override_for("ec2", "us-east-1").unwrap();
        assert_eq!(o.url, "http://127.0.0.1:5000");
        assert_eq!(o.signing_region.as_deref(), Some("us-east-1"));
        assert!(c.override_for("ec2", "eu-west-1").is_none());
        let role = g.role_arn.as_ref().unwrap();
        assert_eq!(
            (role.arn.as_str(), role.account.as_str()),
            ("arn:aws:iam::123456789012:role/x", "123456789012")
        );
        assert_eq!(
            g.source_arn.as_deref(),
            Some("arn:aws:eks:us-east-1:123456789012:cluster/demo")
        );
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn role_arns_are_checked_and_source_arn_alone_is_warned_about() {
        for (bad, says) in [
            ("arn:aws:iam::123:role/x", "not 12 digits"),
            ("arn:aws:s3:::bucket", "not an IAM role's ARN"),
            ("role/x", "not an ARN"),
            ("arn:aws:iam::123456789012:user/x", "not an IAM role's ARN"),
            ("arn:aws:iam::123456789012:role/", "no name"),
        ] {
            let e = Config::parse(&format!("[Global]\nRoleARN = {bad}\n"), "t.conf")
                .unwrap_err()
                .to_string();
            assert!(e.contains("RoleARN") && e.contains(says), "{bad}: {e}");
        }
        let mut c = Config::parse("[Global]\nSourceARN = arn:aws:eks:x\n", "t").unwrap();
        c.validate().unwrap();
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("SourceARN is sent only when assuming RoleARN")),
            "{:?}",
            c.warnings
        );
        let mut c = Config::parse(
            "[Global]\nRoleARN = arn:aws:iam::123456789012:role/x\nSourceARN = \"a\\tb\"\n",
            "t",
        )
        .unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("SourceARN") && e.contains("control"), "{e}");
    }

    #[test]
    fn unknown_keys_and_sections_warn_by_name() {
        let c = Config::parse(
            "[Global]\nZoen = x\n[Nope]\na = b\n[Hypercloud]\nfoo = 1\n",
            "t",
        )
        .unwrap();
        let w = c.warnings.join("\n");
        assert!(w.contains("unknown key \"Zoen\" in [Global]"), "{w}");
        assert!(w.contains("unknown section [Nope]"), "{w}");
        assert!(w.contains("unknown key \"foo\" in [Hypercloud]"), "{w}");
    }

    #[test]
    fn volume_waits_scale() {
        let c = Config::parse("", "t").unwrap();
        assert_eq!(c.tuning.volume_wait_scale, 1.0);
        let c = Config::parse("[Hypercloud]\nvolume-wait-scale = 0.01\n", "t").unwrap();
        assert_eq!(c.tuning.volume_wait_scale, 0.01);
    }

    #[test]
    fn bad_values_and_ranges_are_errors_naming_the_key() {
        for (text, want) in [
            (
                "[Global]\nDisableSecurityGroupIngress = maybe\n",
                "DisableSecurityGroupIngress",
            ),
            (
                "[Global]\nNodeIPFamilies = ipv5\n",
                "\"ipv5\" is not ipv4 or ipv6",
            ),
            ("[Hypercloud]\nmax-attempts = 0\n", "out of range (1 to 20)"),
            (
                "[Hypercloud]\nmax-attempts = 99999999999\n",
                "not a whole number",
            ),
            (
                "[Hypercloud]\ninstance-cache-ttl = 1h\n",
                "out of range (0s to 600s)",
            ),
            (
                "[Hypercloud]\ninstance-cache-ttl = 1e400s\n",
                "not a duration",
            ),
            (
                "[Hypercloud]\nmetadata-endpoint = 169.254.169.254\n",
                "not an http(s) URL",
            ),
            (
                "[Hypercloud]\nvolume-wait-scale = 0\n",
                "out of range (0.001 to 10)",
            ),
            (
                "[Hypercloud]\nvolume-wait-scale = NaN\n",
                "out of range (0.001 to 10)",
            ),
            ("[Hypercloud]\nvolume-wait-scale = fast\n", "not a number"),
        ] {
            let e = Config::parse(text, "t").unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn overrides_are_checked() {
        for (text, want) in [
            ("[ServiceOverride \"1\"]\nService = ec2\nRegion = r\n", "URL is required"),
            (
                "[ServiceOverride \"1\"]\nService = ec2\nRegion = r\nURL = x\n",
                "not an http(s) URL",
            ),
            (
                "[ServiceOverride \"1\"]\nService = ec2\nRegion = r\nURL = http://a\nSigningMethod = v2\n",
                "SigningMethod \"v2\" is not supported",
            ),
            (
                "[ServiceOverride \"1\"]\nService = ec2\nRegion = r\nURL = http://a\n[ServiceOverride \"2\"]\nService = ec2\nRegion = r\nURL = http://b\n",
                "more than one override",
            ),
        ] {
            let mut c = Config::parse(text, "t").unwrap();
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let mut c = Config::parse(
            "[ServiceOverride \"k\"]\nService = kms\nRegion = r\nURL = http://a\n",
            "t",
        )
        .unwrap();
        c.validate().unwrap();
        assert!(
            c.warnings[0].contains("Service=kms is not called"),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn zones_to_regions() {
        assert_eq!(zone_to_region("us-east-1a").as_deref(), Some("us-east-1"));
        assert_eq!(zone_to_region("eu-west-2c").as_deref(), Some("eu-west-2"));
        assert_eq!(
            zone_to_region("us-west-2-lax-1a").as_deref(),
            Some("us-west-2")
        );
        assert_eq!(zone_to_region("x").as_deref(), None);
        assert_eq!(zone_to_region("us-east-1").as_deref(), None);
    }

    hypercloud_cloudprovider::config_fuzz!(Config::parse, "fuzz.conf", mutated_upstream => UPSTREAM);
}
