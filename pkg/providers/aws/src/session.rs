//! Region, credentials and the SDK clients, resolved once per provider.
//!
//! Region: `[Global] Zone` (its region), else `AWS_REGION`/`AWS_DEFAULT_REGION`, else the zone
//! in instance metadata, as the legacy provider (which knew only the first and the last).
//! Credentials: the SDK's default chain, with its instance-role step pointed at
//! `[Hypercloud] metadata-endpoint`; with `[Global] RoleARN`, the role's, assumed through STS
//! with the chain's ([`AssumedRole`]). Endpoints: `[ServiceOverride "N"]` for the region, signed
//! for its `SigningRegion`. The HTTPS client is rustls on ring (the workspace's TLS stack).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_config::provider_config::ProviderConfig;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;
use hypercloud_cloudprovider::http_body::{Limited, ERROR_PREFIX_LIMIT, LIST_LIMIT};

use crate::config::{zone_to_region, RoleArn, SERVICE_EC2, SERVICE_ELB, SERVICE_STS};
use crate::error::sdk;
use crate::{Aws, CLUSTER_TAG_PREFIX, LEGACY_CLUSTER_TAG};

/// Connecting to an AWS endpoint (the SDK's own default is 3.1s; a little more for a loaded
/// node). Upstream's config has no key for any of these timeouts; the SDK has none by default
/// beyond connecting, so a server that accepts and never answers would hang the provider.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// One attempt of a call: the largest answers we ask for (a `DescribeInstances` page of 1000
/// instances) take a few seconds.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(20);
/// One call, its retries and their back-off included.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(60);

/// The SDK clients' timeouts (EC2, ELB, ELBv2 and the credential chain's HTTP calls).
fn timeouts() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .operation_attempt_timeout(ATTEMPT_TIMEOUT)
        .operation_timeout(OPERATION_TIMEOUT)
        .build()
}

/// Requests sent to AWS (every attempt, retries included), per API.
#[derive(Debug, Default)]
pub struct RequestCounts {
    ec2: AtomicU64,
    elb: AtomicU64,
    elbv2: AtomicU64,
    sts: AtomicU64,
}

impl RequestCounts {
    /// EC2 requests.
    pub fn ec2(&self) -> u64 {
        self.ec2.load(Ordering::Relaxed)
    }
    /// Classic ELB requests.
    pub fn elb(&self) -> u64 {
        self.elb.load(Ordering::Relaxed)
    }
    /// ELBv2 requests.
    pub fn elbv2(&self) -> u64 {
        self.elbv2.load(Ordering::Relaxed)
    }
    /// STS requests (`AssumeRole` for `[Global] RoleARN`).
    pub fn sts(&self) -> u64 {
        self.sts.load(Ordering::Relaxed)
    }
}

#[derive(Debug, Clone, Copy)]
enum Api {
    Ec2,
    Elb,
    Elbv2,
    Sts,
}

/// Counts each attempt the SDK sends.
#[derive(Debug)]
struct Counter(Arc<RequestCounts>, Api);

impl Intercept for Counter {
    fn name(&self) -> &'static str {
        "hypercloud-request-counter"
    }

    fn read_before_attempt(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let c = match self.1 {
            Api::Ec2 => &self.0.ec2,
            Api::Elb => &self.0.elb,
            Api::Elbv2 => &self.0.elbv2,
            Api::Sts => &self.0.sts,
        };
        c.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// The SDK's HTTPS client with every answer capped (issue #29): the SDK reads bodies itself,
/// so each response body it gets is a [`Limited`] one: [`LIST_LIMIT`] for a success (a page of
/// a describe call), [`ERROR_PREFIX_LIMIT`] for an error (AWS error documents are a few hundred
/// bytes). Under every SDK client: EC2, ELB, ELBv2 and the credential chain (IMDS, STS).
#[derive(Debug)]
struct CappedClient(SharedHttpClient);

impl HttpClient for CappedClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(CappedConnector(self.0.http_connector(settings, components)))
    }

    fn validate_base_client_config(
        &self,
        runtime_components: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponentsBuilder,
        cfg: &ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.validate_base_client_config(runtime_components, cfg)
    }

    fn connector_metadata(
        &self,
    ) -> Option<aws_smithy_runtime_api::client::connector_metadata::ConnectorMetadata> {
        self.0.connector_metadata()
    }
}

#[derive(Debug)]
struct CappedConnector(SharedHttpConnector);

impl HttpConnector for CappedConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let call = format!("{} {}", request.method(), request.uri());
        let reply = self.0.call(request);
        HttpConnectorFuture::new(async move {
            let mut reply = reply.await?;
            let limit = if reply.status().is_success() {
                LIST_LIMIT
            } else {
                ERROR_PREFIX_LIMIT
            };
            let body = reply.take_body();
            *reply.body_mut() = SdkBody::from_body_1_x(Limited::new(body, limit, "AWS", call));
            Ok(reply)
        })
    }
}

/// The cluster's tag: `kubernetes.io/cluster/<id>`, or the legacy `KubernetesCluster=<id>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClusterTag {
    pub id: String,
    pub legacy: bool,
}

/// What every call needs.
pub(crate) struct Session {
    pub region: String,
    pub cluster: Option<ClusterTag>,
    pub ec2: aws_sdk_ec2::Client,
    pub elb: aws_sdk_elasticloadbalancing::Client,
    pub elbv2: aws_sdk_elasticloadbalancingv2::Client,
}

impl Aws {
    async fn resolve_region(&self) -> hypercloud_cloudprovider::Result<String> {
        if let Some(zone) = &self.config.global.zone {
            return zone_to_region(zone).ok_or_else(|| {
                hypercloud_cloudprovider::Error::InvalidCloudConfig {
                    provider: crate::PROVIDER_NAME.into(),
                    origin: self.config.origin.clone(),
                    message: format!(
                        "[Global] Zone {zone:?} is not an availability zone name (e.g. us-east-1a)"
                    ),
                }
            });
        }
        for var in ["AWS_REGION", "AWS_DEFAULT_REGION"] {
            if let Some(r) = std::env::var(var).ok().filter(|r| !r.trim().is_empty()) {
                return Ok(r.trim().to_owned());
            }
        }
        let id = self.local_identity().await.map_err(|e| {
            hypercloud_cloudprovider::Error::Initialize {
                provider: crate::PROVIDER_NAME.into(),
                source: Box::new(crate::Error::NoRegion(e)),
            }
        })?;
        zone_to_region(&id.availability_zone).ok_or_else(|| {
            hypercloud_cloudprovider::Error::initialize(
                crate::PROVIDER_NAME,
                format!(
                    "instance metadata gave availability zone {:?}, which names no region",
                    id.availability_zone
                ),
            )
        })
    }

    pub(crate) async fn connect(&self) -> hypercloud_cloudprovider::Result<Session> {
        // The SDK panics on some of what it reads by itself: checked before it does.
        crate::environment::check()?;
        let region = self.resolve_region().await?;
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let http = SharedHttpClient::new(CappedClient(http));
        let provider_config = ProviderConfig::without_region()
            .with_http_client(http.clone())
            .with_region(Some(Region::new(region.clone())));
        let imds = aws_config::imds::Client::builder()
            .configure(&provider_config)
            .endpoint(&self.config.tuning.metadata_endpoint)
            .map_err(|e| {
                hypercloud_cloudprovider::Error::initialize(
                    crate::PROVIDER_NAME,
                    format!("metadata endpoint: {e}"),
                )
            })?
            .build();
        let credentials = aws_config::default_provider::credentials::Builder::default()
            .configure(provider_config)
            .imds_client(imds)
            .region(Region::new(region.clone()))
            .build()
            .await;
        let endpoint = |service: &str| {
            self.config.override_for(service, &region).map(|o| {
                let signing = o.signing_region.clone().unwrap_or_else(|| region.clone());
                (o.url.clone(), Region::new(signing))
            })
        };
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .timeout_config(timeouts())
            .http_client(http)
            .region(Region::new(region.clone()))
            .credentials_provider(credentials);
        // Not the shared `hypercloud_cloudprovider::retry` policy: the SDK's standard retry
        // mode already classifies AWS's throttling and transient errors, with jittered back-off
        // and a retry quota, and every AWS call goes through it.
        if let Some(n) = self.config.tuning.max_attempts {
            loader = loader.retry_config(RetryConfig::standard().with_max_attempts(n));
        }
        let mut sdk = loader.load().await;
        // RoleARN: an STS client as the services' (the chain's credentials, timeouts, retries),
        // and the services with the role's credentials.
        if let Some(role) = &self.config.global.role_arn {
            let mut sts = aws_sdk_sts::config::Builder::from(&sdk)
                .interceptor(Counter(self.counts.clone(), Api::Sts));
            if let Some((url, signing)) = endpoint(SERVICE_STS) {
                sts = sts.endpoint_url(url).region(signing);
            }
            let assumed = AssumedRole::new(
                aws_sdk_sts::Client::from_conf(sts.build()),
                role.clone(),
                self.config.global.source_arn.clone(),
                self.config.tuning.assume_role_duration,
            );
            sdk = sdk
                .into_builder()
                .credentials_provider(SharedCredentialsProvider::new(assumed))
                .build();
        }

        let mut ec2 = aws_sdk_ec2::config::Builder::from(&sdk)
            .interceptor(Counter(self.counts.clone(), Api::Ec2));
        if let Some((url, signing)) = endpoint(SERVICE_EC2) {
            ec2 = ec2.endpoint_url(url).region(signing);
        }
        let mut elb = aws_sdk_elasticloadbalancing::config::Builder::from(&sdk)
            .interceptor(Counter(self.counts.clone(), Api::Elb));
        let mut elbv2 = aws_sdk_elasticloadbalancingv2::config::Builder::from(&sdk)
            .interceptor(Counter(self.counts.clone(), Api::Elbv2));
        if let Some((url, signing)) = endpoint(SERVICE_ELB) {
            elb = elb.endpoint_url(url.clone()).region(signing.clone());
            elbv2 = elbv2.endpoint_url(url).region(signing);
        }
        let ec2 = aws_sdk_ec2::Client::from_conf(ec2.build());
        let g = &self.config.global;
        let cluster = match (&g.kubernetes_cluster_id, &g.kubernetes_cluster_tag) {
            (Some(id), _) => Some(ClusterTag {
                id: id.clone(),
                legacy: false,
            }),
            (None, Some(id)) => Some(ClusterTag {
                id: id.clone(),
                legacy: true,
            }),
            (None, None) => self.discover_cluster_tag(&ec2).await,
        };
        if cluster.is_none() {
            tracing::warn!("aws: no cluster ID ([Global] KubernetesClusterID, nor a kubernetes.io/cluster/<ID> tag on this instance): instances and load balancers of other clusters in this account are not told apart");
        }
        Ok(Session {
            region,
            cluster,
            ec2,
            elb: aws_sdk_elasticloadbalancing::Client::from_conf(elb.build()),
            elbv2: aws_sdk_elasticloadbalancingv2::Client::from_conf(elbv2.build()),
        })
    }

    /// As upstream without a configured ID: the cluster tag on the instance this runs on.
    /// Best effort: off an instance (no metadata) there is none.
    async fn discover_cluster_tag(&self, ec2: &aws_sdk_ec2::Client) -> Option<ClusterTag> {
        let id = match self.local_identity().await {
            Ok(id) => id,
            Err(e) => {
                tracing::info!(error = %e, "aws: no instance metadata, so no cluster tag to discover");
                return None;
            }
        };
        let reply = ec2
            .describe_instances()
            .instance_ids(&id.instance_id)
            .send()
            .await
            .map_err(|e| sdk("DescribeInstances", e));
        let reply = match reply {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "aws: cannot read this instance's tags for the cluster ID");
                return None;
            }
        };
        let tags = reply
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .flat_map(|i| i.tags())
            .filter_map(|t| Some((t.key()?, t.value().unwrap_or_default())))
            .collect::<Vec<_>>();
        tags.iter()
            .find_map(|(k, _)| k.strip_prefix(CLUSTER_TAG_PREFIX))
            .map(|id| ClusterTag {
                id: id.to_owned(),
                legacy: false,
            })
            .or_else(|| {
                tags.iter()
                    .find(|(k, _)| *k == LEGACY_CLUSTER_TAG)
                    .map(|(_, v)| ClusterTag {
                        id: v.to_string(),
                        legacy: true,
                    })
            })
    }
}

/// `[Global] RoleARN`'s credentials (upstream: `stscreds.NewAssumeRoleProvider` on an STS
/// client that sends `x-amz-source-account`, the role's account, and with `SourceARN`
/// `x-amz-source-arn`): one `AssumeRole` with the default chain's credentials per call of
/// [`ProvideCredentials::provide_credentials`]. The SDK's identity cache in front of it asks
/// again shortly before the credentials expire, so a running provider renews them.
#[derive(Debug)]
struct AssumedRole {
    sts: aws_sdk_sts::Client,
    role: RoleArn,
    source_arn: Option<String>,
    duration: Option<Duration>,
    session: String,
}

impl AssumedRole {
    fn new(
        sts: aws_sdk_sts::Client,
        role: RoleArn,
        source_arn: Option<String>,
        duration: Option<Duration>,
    ) -> Self {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        tracing::info!(role = %role.arn, "aws: using the assumed role's credentials");
        AssumedRole {
            sts,
            role,
            source_arn,
            duration,
            session: format!("hypercloud-{millis}"),
        }
    }

    async fn assume(&self) -> aws_credential_types::provider::Result {
        use aws_credential_types::provider::error::CredentialsError;
        let mut headers = vec![("x-amz-source-account", self.role.account.clone())];
        if let Some(src) = &self.source_arn {
            headers.push(("x-amz-source-arn", src.clone()));
        }
        let out = self
            .sts
            .assume_role()
            .role_arn(&self.role.arn)
            .role_session_name(&self.session)
            .set_duration_seconds(
                self.duration
                    .map(|d| i32::try_from(d.as_secs()).unwrap_or(i32::MAX)),
            )
            .customize()
            // Before signing, so the headers are signed, as upstream's Build-step middleware.
            .mutate_request(move |req| {
                for (name, value) in &headers {
                    req.headers_mut().insert(*name, value.clone());
                }
            })
            .send()
            .await
            .map_err(|e| {
                CredentialsError::provider_error(format!(
                    "assuming role {} ([Global] RoleARN): {}",
                    self.role.arn,
                    hypercloud_cloudprovider::Chain(&crate::error::sdk("AssumeRole", e))
                ))
            })?;
        let c = out.credentials.ok_or_else(|| {
            CredentialsError::provider_error(format!(
                "assuming role {}: STS answered without credentials",
                self.role.arn
            ))
        })?;
        let expiry = std::time::SystemTime::try_from(c.expiration).map_err(|e| {
            CredentialsError::provider_error(format!(
                "assuming role {}: the credentials' expiration: {e}",
                self.role.arn
            ))
        })?;
        tracing::debug!(role = %self.role.arn, access_key_id = %c.access_key_id, "aws: assumed the role");
        Ok(aws_credential_types::Credentials::new(
            c.access_key_id,
            c.secret_access_key,
            Some(c.session_token),
            Some(expiry),
            "AssumeRole",
        ))
    }
}

impl ProvideCredentials for AssumedRole {
    fn provide_credentials<'a>(
        &'a self,
    ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        aws_credential_types::provider::future::ProvideCredentials::new(self.assume())
    }
}
