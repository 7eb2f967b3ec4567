//! Network security groups (see [`super`]).

use super::*;

// ---- network security groups ---------------------------------------------------------------

/// A port range: `*`, `80` or `8000-8100`.
pub(super) fn port_range_ok(r: &str) -> bool {
    let port = |x: &str| x.trim().parse::<u16>().is_ok();
    r == "*"
        || port(r)
        || r.split_once('-').is_some_and(|(a, b)| {
            port(a) && port(b) && a.trim().parse::<u16>().ok() <= b.trim().parse::<u16>().ok()
        })
}

pub(super) fn apply_nsg(want: &mut Desired) -> Result<(), ApiError> {
    let rules = children_of(&want.properties, "securityRules")?;
    let mut seen: Vec<(String, i64, String)> = Vec::new();
    let mut cleaned = Vec::new();
    for (name, mut p) in rules {
        let field = |k: &str| format!("securityRules[{name}].{k}");
        let one_of = |k: &str,
                      allowed: &[&str],
                      p: &Map<String, Value>|
         -> Result<String, ApiError> {
            let v = string(p, k, &field(k))?.ok_or_else(|| {
                invalid(
                    "InvalidRequestFormat",
                    format!("Cannot parse the request: {} is required.", field(k)),
                )
            })?;
            allowed
                .iter()
                .find(|a| a.eq_ignore_ascii_case(v))
                .map(|a| (*a).to_owned())
                .ok_or_else(|| invalid("SecurityRuleParameterContainsUnsupportedValue", format!("Security rule parameter {} has an invalid value {v}: one of {} is expected.", field(k), allowed.join(", "))))
        };
        let protocol = one_of("protocol", &["Tcp", "Udp", "Icmp", "Esp", "Ah", "*"], &p)?;
        let access = one_of("access", &["Allow", "Deny"], &p)?;
        let direction = one_of("direction", &["Inbound", "Outbound"], &p)?;
        let priority = p.get("priority").and_then(Value::as_i64).ok_or_else(|| {
            invalid(
                "SecurityRuleInvalidPriority",
                format!(
                    "Security rule {name} has no priority: a number from 100 to 4096 is required."
                ),
            )
        })?;
        if !(100..=4096).contains(&priority) {
            return Err(invalid("SecurityRuleInvalidPriority", format!("Security rule {name} has invalid Priority. Value provided: {priority} Allowed range 100-4096.")));
        }
        if let Some((other, _, _)) = seen
            .iter()
            .find(|(_, pr, d)| *pr == priority && *d == direction)
        {
            return Err(invalid("SecurityRulesInvalidPriorityDuplicate", format!("Security rules {other} and {name} have the same Priority {priority} and Direction {direction}.")));
        }
        for k in ["sourcePortRange", "destinationPortRange"] {
            if let Some(r) = string(&p, k, &field(k))? {
                if !port_range_ok(r) {
                    return Err(invalid("SecurityRuleInvalidPortRange", format!("Security rule {name} has invalid Port range {r} at {k}. Value provided: {r}. Value should be an integer OR integer range with '-' delimiter. Valid range 0-65535.")));
                }
            }
        }
        for k in ["sourcePortRanges", "destinationPortRanges"] {
            for r in list(&p, k, &field(k))? {
                if !r.as_str().is_some_and(port_range_ok) {
                    return Err(invalid(
                        "SecurityRuleInvalidPortRange",
                        format!("Security rule {name} has invalid Port range {r} at {k}."),
                    ));
                }
            }
        }
        p.insert("protocol".into(), json!(protocol));
        p.insert("access".into(), json!(access));
        p.insert("direction".into(), json!(direction));
        p.remove("provisioningState");
        seen.push((name.to_owned(), priority, direction));
        cleaned.push(json!({"name": name, "properties": p}));
    }
    want.properties
        .insert("securityRules".into(), Value::Array(cleaned));
    Ok(())
}

/// The six rules every network security group has below its own.
pub(super) fn default_rules(s: &Scope<'_>, res: &ArmResource) -> Vec<Value> {
    let rule = |name: &str,
                desc: &str,
                src: &str,
                dst: &str,
                access: &str,
                priority: u32,
                dir: &str| {
        let mut v = child_view(
            s,
            res,
            "defaultSecurityRules",
            "defaultSecurityRules",
            name,
            json!({
                "description": desc, "protocol": "*", "sourcePortRange": "*", "destinationPortRange": "*",
                "sourceAddressPrefix": src, "destinationAddressPrefix": dst, "access": access,
                "priority": priority, "direction": dir, "provisioningState": "Succeeded",
                "sourcePortRanges": [], "destinationPortRanges": [], "sourceAddressPrefixes": [], "destinationAddressPrefixes": [],
            }),
        );
        v["etag"] = json!(res.etag);
        v
    };
    vec![
        rule(
            "AllowVnetInBound",
            "Allow inbound traffic from all VMs in VNET",
            "VirtualNetwork",
            "VirtualNetwork",
            "Allow",
            65000,
            "Inbound",
        ),
        rule(
            "AllowAzureLoadBalancerInBound",
            "Allow inbound traffic from azure load balancer",
            "AzureLoadBalancer",
            "*",
            "Allow",
            65001,
            "Inbound",
        ),
        rule(
            "DenyAllInBound",
            "Deny all inbound traffic",
            "*",
            "*",
            "Deny",
            65500,
            "Inbound",
        ),
        rule(
            "AllowVnetOutBound",
            "Allow outbound traffic from all VMs to all VMs in VNET",
            "VirtualNetwork",
            "VirtualNetwork",
            "Allow",
            65000,
            "Outbound",
        ),
        rule(
            "AllowInternetOutBound",
            "Allow outbound traffic from all VMs to Internet",
            "*",
            "Internet",
            "Allow",
            65001,
            "Outbound",
        ),
        rule(
            "DenyAllOutBound",
            "Deny all outbound traffic",
            "*",
            "*",
            "Deny",
            65500,
            "Outbound",
        ),
    ]
}

pub(super) fn nsg_view(r: &impl Read, s: &Scope<'_>, res: &ArmResource) -> Value {
    let mut p = props(res);
    show_children(&mut p, s, res, "securityRules", |_, rp| {
        for k in [
            "sourcePortRanges",
            "destinationPortRanges",
            "sourceAddressPrefixes",
            "destinationAddressPrefixes",
        ] {
            rp.entry(k).or_insert(json!([]));
        }
    });
    p.insert(
        "defaultSecurityRules".into(),
        Value::Array(default_rules(s, res)),
    );
    p.insert("resourceGuid".into(), json!(res.meta.id));
    let id = s.id(res);
    let nics: Vec<Value> = nics_referring(r, s, "networkSecurityGroup", &id)
        .iter()
        .map(|n| id_ref(s.id(n)))
        .collect();
    if !nics.is_empty() {
        p.insert("networkInterfaces".into(), Value::Array(nics));
    }
    let subnets = subnets_referring(r, s, "networkSecurityGroup", &id);
    if !subnets.is_empty() {
        p.insert("subnets".into(), Value::Array(subnets));
    }
    Value::Object(p)
}
