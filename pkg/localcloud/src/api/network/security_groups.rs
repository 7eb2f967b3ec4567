//! Neutron security groups and their rules: CRUD as Neutron answers it (a new group comes with
//! its two egress rules, IPv4 and IPv6; duplicate rules are 409 `SecurityGroupRuleExists`; a
//! group used by a port cannot be deleted), filtered by name like every Neutron list. Every
//! project has its `default` group (made at seeding, and again on first use should an admin have
//! deleted it, as Neutron's `_ensure_default_security_group`), which new ports get when they name
//! none. Rules are bookkeeping, unless `--enforce-member-security-groups` has the load-balancer
//! data plane apply members' groups (`crate::dataplane::guard`).

use super::*;

impl SecurityGroupRule {
    fn view_json(&self) -> Value {
        self.meta.neutron_view(json!({
            "id": self.meta.id, "security_group_id": self.security_group_id,
            "direction": self.direction, "ethertype": self.ethertype, "protocol": self.protocol,
            "port_range_min": self.port_range_min, "port_range_max": self.port_range_max,
            "remote_ip_prefix": self.remote_ip_prefix, "normalized_cidr": self.remote_ip_prefix,
            "remote_group_id": self.remote_group_id, "remote_address_group_id": null,
            "description": self.description,
        }))
    }

    /// Whether `other` is the same rule (Neutron compares everything but ID and description).
    fn same_as(&self, other: &SecurityGroupRule) -> bool {
        (
            &self.security_group_id,
            &self.direction,
            &self.ethertype,
            &self.protocol,
            self.port_range_min,
            self.port_range_max,
            &self.remote_ip_prefix,
            &self.remote_group_id,
        ) == (
            &other.security_group_id,
            &other.direction,
            &other.ethertype,
            &other.protocol,
            other.port_range_min,
            other.port_range_max,
            &other.remote_ip_prefix,
            &other.remote_group_id,
        )
    }
}

fn rules_of(r: &impl Read, group_id: &str) -> Vec<SecurityGroupRule> {
    r.list_where::<SecurityGroupRule>(SECURITY_GROUP_RULES, "security_group_id", group_id)
}

impl View for SecurityGroup {
    fn view(&self, r: &impl Read) -> Value {
        let rules: Vec<Value> = rules_of(r, &self.meta.id)
            .iter()
            .map(SecurityGroupRule::view_json)
            .collect();
        self.meta.neutron_view(json!({
            "id": self.meta.id, "name": self.name, "description": self.description,
            "stateful": self.stateful, "shared": false, "security_group_rules": rules,
        }))
    }
}

impl View for SecurityGroupRule {
    fn view(&self, _: &impl Read) -> Value {
        self.view_json()
    }
}

/// The group Neutron gives every project, and every port that names no group.
pub(crate) const DEFAULT_GROUP: &str = "default";

/// A rule of group `group_id` as Neutron's defaults write them: any protocol, any port.
fn open_rule(
    project_id: &str,
    group_id: &str,
    direction: &str,
    ethertype: &str,
    remote_group_id: Option<String>,
) -> SecurityGroupRule {
    SecurityGroupRule {
        meta: Meta::new(project_id),
        security_group_id: group_id.to_owned(),
        direction: direction.into(),
        ethertype: ethertype.into(),
        protocol: None,
        port_range_min: None,
        port_range_max: None,
        remote_ip_prefix: None,
        remote_group_id,
        description: String::new(),
    }
}

/// Stores group `sg` with Neutron's "allow all egress" rules, IPv4 and IPv6.
fn put_group(tx: &mut Tx<'_>, sg: &SecurityGroup) -> Result<(), ApiError> {
    tx.put(SECURITY_GROUPS, &sg.meta.id, sg)?;
    for ethertype in ["IPv4", "IPv6"] {
        let rule = open_rule(&sg.meta.project_id, &sg.meta.id, "egress", ethertype, None);
        tx.put(SECURITY_GROUP_RULES, &rule.meta.id.clone(), &rule)?;
    }
    Ok(())
}

/// The id of `project_id`'s `default` group, made as Neutron makes it when missing: egress to
/// anywhere, ingress only from members of the group itself (IPv4 and IPv6 each).
pub(crate) fn ensure_default_group(tx: &mut Tx<'_>, project_id: &str) -> Result<String, ApiError> {
    if let Some(sg) = tx
        .list::<SecurityGroup>(SECURITY_GROUPS)
        .into_iter()
        .find(|g| g.name == DEFAULT_GROUP && g.meta.project_id == project_id)
    {
        return Ok(sg.meta.id);
    }
    let sg = SecurityGroup {
        meta: Meta::new(project_id),
        name: DEFAULT_GROUP.into(),
        description: "Default security group".into(),
        stateful: true,
    };
    put_group(tx, &sg)?;
    for ethertype in ["IPv4", "IPv6"] {
        let rule = open_rule(
            project_id,
            &sg.meta.id,
            "ingress",
            ethertype,
            Some(sg.meta.id.clone()),
        );
        tx.put(SECURITY_GROUP_RULES, &rule.meta.id.clone(), &rule)?;
    }
    Ok(sg.meta.id)
}

/// Neutron's `name_not_default` check on a create or update body: 409, the name is taken.
fn name_not_default(name: &Option<String>) -> Result<(), ApiError> {
    if name
        .as_deref()
        .is_some_and(|n| n.eq_ignore_ascii_case(DEFAULT_GROUP))
    {
        return Err(ApiError::conflict(
            "SecurityGroupDefaultAlreadyExists",
            "Default security group already exists.",
        ));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SecurityGroupBody {
    name: Option<String>,
    description: Option<String>,
    stateful: Option<bool>,
    tenant_id: Option<String>,
    project_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SecurityGroupRuleBody {
    security_group_id: String,
    direction: String,
    ethertype: Option<String>,
    #[serde(default, deserialize_with = "crate::api::nullable")]
    protocol: Option<Option<Value>>,
    port_range_min: Option<i64>,
    port_range_max: Option<i64>,
    remote_ip_prefix: Option<String>,
    remote_group_id: Option<String>,
    description: Option<String>,
    tenant_id: Option<String>,
    project_id: Option<String>,
}

fn invalid_rule(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message).with_kind("InvalidInput")
}

/// The protocols Neutron names; others are given by number 0..=255.
const PROTOCOLS: &[&str] = &[
    "tcp",
    "udp",
    "icmp",
    "icmpv6",
    "ipv6-icmp",
    "sctp",
    "gre",
    "esp",
    "ah",
    "vrrp",
    "igmp",
    "dccp",
    "egp",
    "ipip",
    "ospf",
    "pgm",
    "rsvp",
    "udplite",
    "any",
];

/// The rule a create body asks for, checked as Neutron checks it.
fn rule_from(b: SecurityGroupRuleBody, project_id: String) -> Result<SecurityGroupRule, ApiError> {
    if b.direction != "ingress" && b.direction != "egress" {
        return Err(invalid_rule(format!(
            "Invalid input for direction. Reason: '{}' is not in ['ingress', 'egress'].",
            b.direction
        )));
    }
    let ethertype = b.ethertype.unwrap_or_else(|| "IPv4".into());
    if ethertype != "IPv4" && ethertype != "IPv6" {
        return Err(invalid_rule(format!(
            "Invalid input for ethertype. Reason: '{ethertype}' is not in ['IPv4', 'IPv6']."
        )));
    }
    let protocol = match b.protocol.flatten() {
        None => None,
        Some(Value::String(p)) if PROTOCOLS.contains(&p.to_lowercase().as_str()) => {
            Some(p.to_lowercase())
        }
        Some(Value::String(p)) if p.parse::<u8>().is_ok() => Some(p),
        Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n <= 255) => Some(n.to_string()),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Security group rule protocol {other} not supported. Only protocol values {PROTOCOLS:?} and integer representations [0 to 255] are supported."
            ))
            .with_kind("SecurityGroupRuleInvalidProtocol"))
        }
    };
    // Neutron's ranges: a port of a port-based protocol is 1..=65535 (0 is refused), an ICMP
    // type or code is 0..=255.
    let icmp = matches!(protocol.as_deref(), Some("icmp" | "icmpv6" | "ipv6-icmp"));
    let port = |k: &str, v: Option<i64>| -> Result<Option<u16>, ApiError> {
        let (lo, hi) = if icmp { (0, 255) } else { (1, 65_535) };
        match v {
            None => Ok(None),
            Some(n) => u16::try_from(n)
                .ok()
                .filter(|p| (lo..=hi).contains(p))
                .map(Some)
                .ok_or_else(|| {
                    if icmp {
                        ApiError::bad_request(format!(
                            "Invalid value for ICMP {} (port-range-min): {n}",
                            if k == "port_range_min" {
                                "type"
                            } else {
                                "code"
                            }
                        ))
                        .with_kind("SecurityGroupInvalidIcmpValue")
                    } else {
                        ApiError::bad_request(format!("Invalid value for port {n} ({k})"))
                            .with_kind("InvalidPortValue")
                    }
                }),
        }
    };
    let min = port("port_range_min", b.port_range_min)?;
    let max = port("port_range_max", b.port_range_max)?;
    if (min.is_some() || max.is_some())
        && !matches!(
            protocol.as_deref(),
            Some("tcp" | "udp" | "sctp" | "dccp" | "udplite" | "icmp" | "icmpv6" | "ipv6-icmp")
        )
    {
        return Err(invalid_rule(
            "Must also specify protocol if port range is given.",
        ));
    }
    if let (Some(a), Some(z)) = (min, max) {
        if a > z && matches!(protocol.as_deref(), Some("tcp" | "udp" | "sctp")) {
            return Err(ApiError::bad_request(
                "For TCP/UDP protocols, port_range_min must be <= port_range_max",
            )
            .with_kind("SecurityGroupInvalidPortRange"));
        }
    }
    if b.remote_ip_prefix.is_some() && b.remote_group_id.is_some() {
        return Err(ApiError::bad_request(
            "Only remote_ip_prefix or remote_group_id may be provided.",
        )
        .with_kind("SecurityGroupRemoteGroupAndRemoteIpPrefix"));
    }
    if let Some(prefix) = &b.remote_ip_prefix {
        let ok = prefix.split_once('/').is_some_and(|(a, l)| {
            match (a.parse::<std::net::IpAddr>(), l.parse::<u8>()) {
                (Ok(std::net::IpAddr::V4(_)), Ok(l)) => l <= 32 && ethertype == "IPv4",
                (Ok(std::net::IpAddr::V6(_)), Ok(l)) => l <= 128 && ethertype == "IPv6",
                _ => false,
            }
        });
        if !ok {
            return Err(invalid_rule(format!(
                "Invalid input for remote_ip_prefix. Reason: '{prefix}' is not a valid {ethertype} CIDR."
            )));
        }
    }
    Ok(SecurityGroupRule {
        meta: Meta::new(project_id),
        security_group_id: b.security_group_id,
        direction: b.direction,
        ethertype,
        protocol,
        port_range_min: min,
        port_range_max: max,
        remote_ip_prefix: b.remote_ip_prefix,
        remote_group_id: b.remote_group_id,
        description: b.description.unwrap_or_default(),
    })
}

/// Stores `rule`: 404 for an unknown group (or remote group), 409 for a duplicate.
fn insert_rule(tx: &mut Tx<'_>, rule: &SecurityGroupRule) -> Result<(), ApiError> {
    find::<SecurityGroup>(tx, &rule.security_group_id)?;
    if let Some(remote) = &rule.remote_group_id {
        find::<SecurityGroup>(tx, remote)?;
    }
    if let Some(dup) = rules_of(tx, &rule.security_group_id)
        .iter()
        .find(|o| o.same_as(rule))
    {
        return Err(ApiError::conflict(
            "SecurityGroupRuleExists",
            format!(
                "Security group rule already exists. Rule id is {}.",
                dup.meta.id
            ),
        ));
    }
    tx.put(SECURITY_GROUP_RULES, &rule.meta.id.clone(), rule)?;
    Ok(())
}

impl Create for SecurityGroup {
    type Body = SecurityGroupBody;

    fn check(b: &SecurityGroupBody) -> Result<(), ApiError> {
        name_not_default(&b.name)
    }

    fn create(tx: &mut Tx<'_>, caller: &Caller, b: SecurityGroupBody) -> Result<Self, ApiError> {
        let project_id = project_of(caller, &b.project_id.or(b.tenant_id));
        ensure_default_group(tx, &project_id)?;
        let sg = SecurityGroup {
            meta: Meta::new(project_id.clone()),
            name: b.name.unwrap_or_default(),
            description: b.description.unwrap_or_default(),
            stateful: b.stateful.unwrap_or(true),
        };
        put_group(tx, &sg)?;
        Ok(sg)
    }
}

impl Update for SecurityGroup {
    type Body = SecurityGroupBody;

    fn check(b: &SecurityGroupBody) -> Result<(), ApiError> {
        name_not_default(&b.name)
    }

    fn update(&mut self, _: &mut Tx<'_>, b: SecurityGroupBody) -> Result<(), ApiError> {
        if self.name == DEFAULT_GROUP && b.name.is_some() {
            return Err(ApiError::conflict(
                "SecurityGroupCannotUpdateDefault",
                "Updating default security group not allowed.",
            ));
        }
        set_given!(self <- b: name, description, stateful);
        Ok(())
    }
}

impl Release for SecurityGroup {
    fn release(&self, tx: &mut Tx<'_>) -> Result<(), ApiError> {
        let id = &self.meta.id;
        if tx
            .list::<Port>(PORTS)
            .iter()
            .any(|p| p.security_groups.contains(id))
        {
            return Err(ApiError::conflict(
                "SecurityGroupInUse",
                format!("Security Group {id} in use."),
            ));
        }
        for rule in rules_of(tx, id) {
            tx.delete(SECURITY_GROUP_RULES, &rule.meta.id);
        }
        Ok(())
    }
}

pub(super) async fn create_security_group_rule(
    State(cloud): Ctx,
    axum::Extension(caller): CallerExt,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: SecurityGroupRuleBody = parse_wrapped(&body, "security_group_rule")?;
    let project_id = project_of(&caller, &b.project_id.clone().or(b.tenant_id.clone()));
    let rule = rule_from(b, project_id)?;
    let rule = cloud
        .write(move |tx| {
            insert_rule(tx, &rule)?;
            Ok(rule)
        })
        .await?;
    Ok(created(&cloud, &rule))
}

impl Release for SecurityGroupRule {}
