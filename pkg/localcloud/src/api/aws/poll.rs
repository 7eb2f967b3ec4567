//! The follower's reads from moto, with the AWS SDK: classic ELBs (`DescribeLoadBalancers`,
//! `DescribeLoadBalancerPolicies` for proxy protocol), NLBs (`DescribeLoadBalancers`,
//! `DescribeListeners`, `DescribeTargetGroups`, `DescribeTargetHealth`) and the instances'
//! private addresses (`DescribeInstances`), turned into [`Followed`] load balancers; then the
//! loop that applies them to the store every `interval`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use aws_sdk_ec2::config::{BehaviorVersion, Credentials, Region};
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
use tokio::sync::watch;

use super::{hosts_file, map_address, sync, AwsFollow, Backend, Check, Followed, FollowedListener};
use crate::api::Cloud;

/// Why a poll of moto failed (the last followed state stays in place).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PollError {
    #[error("DescribeInstances failed")]
    DescribeInstances(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("elb DescribeLoadBalancers failed")]
    DescribeClassic(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("elb DescribeLoadBalancerPolicies of {name} failed")]
    DescribePolicies {
        name: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("elbv2 {operation} failed")]
    DescribeV2 {
        operation: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

fn boxed(
    e: impl std::error::Error + Send + Sync + 'static,
) -> Box<dyn std::error::Error + Send + Sync> {
    Box::new(e)
}

struct Clients {
    ec2: aws_sdk_ec2::Client,
    elb: aws_sdk_elasticloadbalancing::Client,
    elbv2: aws_sdk_elasticloadbalancingv2::Client,
}

fn clients(f: &AwsFollow) -> Clients {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    // moto checks no signature; the SDK still signs, with the environment's keys if set.
    let key = std::env::var("AWS_ACCESS_KEY_ID").unwrap_or_else(|_| "local-cloud".into());
    let secret =
        std::env::var("AWS_SECRET_ACCESS_KEY").unwrap_or_else(|_| "local-cloud-secret".into());
    let credentials = Credentials::new(key, secret, None, None, "local-cloud --follow-aws-elb");
    let region = Region::new(f.region.clone());
    let ec2 = aws_sdk_ec2::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .http_client(http.clone())
        .region(region.clone())
        .endpoint_url(&f.endpoint)
        .credentials_provider(credentials.clone())
        .build();
    let elb = aws_sdk_elasticloadbalancing::Config::builder()
        .behavior_version(aws_sdk_elasticloadbalancing::config::BehaviorVersion::latest())
        .http_client(http.clone())
        .region(aws_sdk_elasticloadbalancing::config::Region::new(
            f.region.clone(),
        ))
        .endpoint_url(&f.endpoint)
        .credentials_provider(credentials.clone())
        .build();
    let elbv2 = aws_sdk_elasticloadbalancingv2::Config::builder()
        .behavior_version(aws_sdk_elasticloadbalancingv2::config::BehaviorVersion::latest())
        .http_client(http)
        .region(aws_sdk_elasticloadbalancingv2::config::Region::new(
            f.region.clone(),
        ))
        .endpoint_url(&f.endpoint)
        .credentials_provider(credentials)
        .build();
    Clients {
        ec2: aws_sdk_ec2::Client::from_conf(ec2),
        elb: aws_sdk_elasticloadbalancing::Client::from_conf(elb),
        elbv2: aws_sdk_elasticloadbalancingv2::Client::from_conf(elbv2),
    }
}

/// Follows moto until `stop` turns true.
pub(crate) async fn follow(cloud: Arc<Cloud>, f: AwsFollow, mut stop: watch::Receiver<bool>) {
    let c = clients(&f);
    let path = cloud.config.state_dir.join(super::HOSTS_FILE);
    let mut last: Option<Vec<Followed>> = None;
    loop {
        match poll(&c, &f).await {
            Ok(wanted) if last.as_ref() != Some(&wanted) => {
                let apply = wanted.clone();
                let c2 = cloud.clone();
                match cloud.write(move |tx| sync(tx, &c2, &apply)).await {
                    Ok(hosts) => {
                        if let Err(error) =
                            crate::store::write_atomic(&path, hosts_file(&hosts).as_bytes())
                        {
                            tracing::warn!(%error, path = %path.display(), "cannot write the AWS load balancers' hosts file");
                        }
                        tracing::info!(
                            load_balancers = hosts.len(),
                            "followed moto's load balancers"
                        );
                        last = Some(wanted);
                    }
                    Err(e) => {
                        tracing::warn!(error = e.message, "applying moto's load balancers failed")
                    }
                }
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(
                error = &error as &dyn std::error::Error,
                "polling moto's load balancers failed"
            ),
        }
        tokio::select! {
            _ = tokio::time::sleep(f.interval) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Instance ID → private address (mapped).
async fn addresses(c: &Clients, f: &AwsFollow) -> Result<HashMap<String, String>, PollError> {
    let mut out = HashMap::new();
    let mut token = None;
    loop {
        let page = c
            .ec2
            .describe_instances()
            .set_next_token(token)
            .send()
            .await
            .map_err(|e| PollError::DescribeInstances(boxed(e)))?;
        for i in page.reservations().iter().flat_map(|r| r.instances()) {
            if let (Some(id), Some(ip)) = (i.instance_id(), i.private_ip_address()) {
                out.insert(id.to_owned(), map_address(&f.address_map, ip));
            }
        }
        token = page.next_token().map(str::to_owned);
        if token.is_none() {
            return Ok(out);
        }
    }
}

fn port(p: i32) -> Option<u16> {
    u16::try_from(p).ok().filter(|p| *p > 0)
}

/// A classic ELB's `HealthCheck.Target`: `TCP:80`, `SSL:443`, `HTTP:80/healthz`, `HTTPS:443/x`.
fn classic_check(hc: &aws_sdk_elasticloadbalancing::types::HealthCheck) -> Option<Check> {
    let (proto, rest) = hc.target().split_once(':')?;
    let (port_s, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_owned()),
        None => (rest, "/".to_owned()),
    };
    let kind = match proto.to_ascii_uppercase().as_str() {
        "HTTP" => "HTTP",
        _ => "TCP",
    };
    let numbers = [
        hc.interval(),
        hc.timeout(),
        hc.healthy_threshold(),
        hc.unhealthy_threshold(),
    ];
    Some(Check::new(kind, port_s.parse().ok(), path, numbers))
}

/// An ELB protocol as the data plane carries it (TLS is not terminated).
fn carried(protocol: &str) -> Option<&'static str> {
    match protocol.to_ascii_uppercase().as_str() {
        "TCP" | "SSL" | "TLS" => Some("TCP"),
        "HTTP" | "HTTPS" => Some("HTTP"),
        "UDP" => Some("UDP"),
        _ => None,
    }
}

async fn classic(c: &Clients, addrs: &HashMap<String, String>) -> Result<Vec<Followed>, PollError> {
    let mut out = Vec::new();
    let mut marker = None;
    loop {
        let page = c
            .elb
            .describe_load_balancers()
            .set_marker(marker)
            .send()
            .await
            .map_err(|e| PollError::DescribeClassic(boxed(e)))?;
        for d in page.load_balancer_descriptions() {
            let (Some(name), Some(dns)) = (d.load_balancer_name(), d.dns_name()) else {
                continue;
            };
            let proxy_ports = proxy_ports(c, name, d).await?;
            let check = d.health_check().and_then(classic_check);
            let mut listeners = Vec::new();
            for ld in d.listener_descriptions() {
                let Some(l) = ld.listener() else { continue };
                let (Some(lb_port), Some(instance_port)) =
                    (port(l.load_balancer_port()), port(l.instance_port()))
                else {
                    continue;
                };
                let Some(protocol) = carried(l.protocol()) else {
                    continue;
                };
                let backends = d
                    .instances()
                    .iter()
                    .filter_map(|i| i.instance_id())
                    .filter_map(|id| {
                        addrs
                            .get(id)
                            .map(|ip| (id.to_owned(), ip.clone(), instance_port))
                    })
                    .collect();
                listeners.push(FollowedListener {
                    port: lb_port,
                    protocol,
                    proxy_protocol: proxy_ports.contains(&instance_port),
                    backends,
                    check: check.clone(),
                });
            }
            out.push(Followed {
                dns_name: dns.to_owned(),
                listeners,
            });
        }
        marker = page.next_marker().map(str::to_owned);
        if marker.is_none() {
            return Ok(out);
        }
    }
}

/// The instance ports with a `ProxyProtocolPolicyType` policy (`ProxyProtocol=true`).
async fn proxy_ports(
    c: &Clients,
    name: &str,
    d: &aws_sdk_elasticloadbalancing::types::LoadBalancerDescription,
) -> Result<Vec<u16>, PollError> {
    let with_policies: Vec<_> = d
        .backend_server_descriptions()
        .iter()
        .filter(|b| !b.policy_names().is_empty())
        .collect();
    if with_policies.is_empty() {
        return Ok(Vec::new());
    }
    let policies = c
        .elb
        .describe_load_balancer_policies()
        .load_balancer_name(name)
        .send()
        .await
        .map_err(|e| PollError::DescribePolicies {
            name: name.to_owned(),
            source: boxed(e),
        })?;
    let proxy: Vec<&str> = policies
        .policy_descriptions()
        .iter()
        .filter(|p| p.policy_type_name() == Some("ProxyProtocolPolicyType"))
        .filter(|p| {
            p.policy_attribute_descriptions().iter().any(|a| {
                a.attribute_name() == Some("ProxyProtocol")
                    && a.attribute_value()
                        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
            })
        })
        .filter_map(|p| p.policy_name())
        .collect();
    Ok(with_policies
        .into_iter()
        .filter(|b| b.policy_names().iter().any(|n| proxy.contains(&n.as_str())))
        .filter_map(|b| b.instance_port().and_then(port))
        .collect())
}

fn v2_error(
    operation: &'static str,
) -> impl FnOnce(Box<dyn std::error::Error + Send + Sync>) -> PollError {
    move |source| PollError::DescribeV2 { operation, source }
}

async fn network(c: &Clients, addrs: &HashMap<String, String>) -> Result<Vec<Followed>, PollError> {
    use aws_sdk_elasticloadbalancingv2::types::LoadBalancerTypeEnum;
    let mut out = Vec::new();
    let lbs = c
        .elbv2
        .describe_load_balancers()
        .send()
        .await
        .map_err(|e| v2_error("DescribeLoadBalancers")(boxed(e)))?;
    for lb in lbs.load_balancers() {
        if lb.r#type() != Some(&LoadBalancerTypeEnum::Network) {
            continue;
        }
        let (Some(arn), Some(dns)) = (lb.load_balancer_arn(), lb.dns_name()) else {
            continue;
        };
        let listeners = c
            .elbv2
            .describe_listeners()
            .load_balancer_arn(arn)
            .send()
            .await
            .map_err(|e| v2_error("DescribeListeners")(boxed(e)))?;
        let groups = c
            .elbv2
            .describe_target_groups()
            .load_balancer_arn(arn)
            .send()
            .await
            .map_err(|e| v2_error("DescribeTargetGroups")(boxed(e)))?;
        let mut by_arn: BTreeMap<String, (Option<Check>, Vec<Backend>)> = BTreeMap::new();
        for g in groups.target_groups() {
            let Some(g_arn) = g.target_group_arn() else {
                continue;
            };
            let health = c
                .elbv2
                .describe_target_health()
                .target_group_arn(g_arn)
                .send()
                .await
                .map_err(|e| v2_error("DescribeTargetHealth")(boxed(e)))?;
            let traffic_port = g.port().and_then(port);
            let backends = health
                .target_health_descriptions()
                .iter()
                .filter_map(|t| t.target())
                .filter_map(|t| {
                    let id = t.id()?;
                    let p = t.port().and_then(port).or(traffic_port)?;
                    // Instance targets by ID; IP targets by their address.
                    let ip = addrs
                        .get(id)
                        .cloned()
                        .or_else(|| id.parse::<std::net::IpAddr>().ok().map(|_| id.to_owned()))?;
                    Some((id.to_owned(), ip, p))
                })
                .collect();
            let check = (g.health_check_enabled() != Some(false)).then(|| {
                let kind = match g.health_check_protocol().map(|p| p.as_str()) {
                    Some("HTTP") => "HTTP",
                    _ => "TCP",
                };
                let check_port = g
                    .health_check_port()
                    .filter(|p| *p != "traffic-port")
                    .and_then(|p| p.parse().ok());
                Check::new(
                    kind,
                    check_port,
                    g.health_check_path().unwrap_or("/").to_owned(),
                    [
                        g.health_check_interval_seconds().unwrap_or(30),
                        g.health_check_timeout_seconds().unwrap_or(10),
                        g.healthy_threshold_count().unwrap_or(3),
                        g.unhealthy_threshold_count().unwrap_or(3),
                    ],
                )
            });
            by_arn.insert(g_arn.to_owned(), (check, backends));
        }
        let mut followed = Vec::new();
        for l in listeners.listeners() {
            let (Some(p), Some(protocol)) = (
                l.port().and_then(port),
                l.protocol().and_then(|p| carried(p.as_str())),
            ) else {
                continue;
            };
            let Some((check, backends)) = l
                .default_actions()
                .iter()
                .find_map(|a| a.target_group_arn())
                .and_then(|g| by_arn.get(g))
            else {
                continue;
            };
            followed.push(FollowedListener {
                port: p,
                protocol,
                proxy_protocol: false,
                backends: backends.clone(),
                check: check.clone(),
            });
        }
        out.push(Followed {
            dns_name: dns.to_owned(),
            listeners: followed,
        });
    }
    Ok(out)
}

/// Everything moto holds, as followed load balancers.
async fn poll(c: &Clients, f: &AwsFollow) -> Result<Vec<Followed>, PollError> {
    let addrs = addresses(c, f).await?;
    let mut out = classic(c, &addrs).await?;
    out.extend(network(c, &addrs).await?);
    out.sort_by(|a, b| a.dns_name.cmp(&b.dns_name));
    Ok(out)
}
