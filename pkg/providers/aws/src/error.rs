//! The crate's own errors (config and instance metadata), and the conversion of AWS SDK errors
//! into the provider contract's [`hypercloud_cloudprovider::Error::Cloud`], which keeps the AWS
//! error code, the HTTP status and the request ID.

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use aws_types::request_id::RequestId;
use hypercloud_cloudprovider::http_body::{excerpt_str, excerpt_with};
use hypercloud_cloudprovider::Chain;

use crate::PROVIDER_NAME;

/// Errors of configuration and metadata reading.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cloud config is not valid.
    #[error("invalid cloud config {origin}: {message}")]
    ParseCloudConfig {
        /// The file, or where the bytes came from.
        origin: String,
        /// What is wrong, naming the line and key.
        message: String,
    },

    /// A request to the instance metadata service failed.
    #[error("reading instance metadata {path} from {endpoint}: {message}")]
    ReadMetadata {
        /// The metadata service.
        endpoint: String,
        /// The path asked for.
        path: String,
        /// Why.
        message: String,
    },

    /// No region is configured and instance metadata, which would name it, could not be read.
    #[error("no region: [Global] Zone is not set, nor AWS_REGION, and instance metadata could not be read")]
    NoRegion(#[source] hypercloud_cloudprovider::Error),
}

impl hypercloud_cloudprovider::ProviderError for Error {
    const PROVIDER: &'static str = PROVIDER_NAME;

    /// Only reading instance metadata reaches a provider call with this crate's error.
    fn operation(&self) -> String {
        "read instance metadata".into()
    }

    fn startup(self) -> hypercloud_cloudprovider::Startup<Self> {
        match self {
            Error::ParseCloudConfig { origin, message } => {
                hypercloud_cloudprovider::Startup::InvalidConfig { origin, message }
            }
            other => hypercloud_cloudprovider::Startup::Other(other),
        }
    }
}

/// What an AWS API answered: its error code (`InvalidInstanceID.NotFound`) and message, as
/// short excerpts. The source of the contract's `Cloud` error made by [`sdk`], and what
/// [`code`] reads.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct Api {
    /// The AWS error code, when the answer had one.
    code: Option<String>,
    /// `code: message`, or the code alone, or what the SDK said when no answer came.
    message: String,
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A listing abandoned by its [`Pager`](hypercloud_cloudprovider::pager::Pager) as the
/// contract's `Cloud` error of that call.
pub(crate) fn paginate(
    e: hypercloud_cloudprovider::pager::PagerError,
) -> hypercloud_cloudprovider::Error {
    hypercloud_cloudprovider::Error::Cloud {
        provider: PROVIDER_NAME.into(),
        operation: e.call().into(),
        status: None,
        request_id: None,
        source: Box::new(e),
    }
}

/// An SDK error as the contract's `Cloud` error: `operation` is the AWS action
/// (`DescribeInstances`); the message starts with the AWS error code.
pub(crate) fn sdk<E>(
    operation: &str,
    e: SdkError<E, HttpResponse>,
) -> hypercloud_cloudprovider::Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let status = e.raw_response().map(|r| r.status().as_u16());
    // EC2 sends it as a header and in the error body (`<RequestID>`); ELB in the body
    // (`<RequestId>`). The SDK reads the header; the body is the fallback.
    let request_id = e.request_id().map(str::to_owned).or_else(|| {
        let body = e.raw_response()?.body().bytes()?;
        body_request_id(&String::from_utf8_lossy(body))
    });
    let request_id = request_id.map(|r| excerpt_str(&r));
    // What the server said is quoted as an excerpt; the SDK's `DisplayErrorContext` is not
    // used, as it appends the whole error's Debug form, raw body included (issue #29).
    let code = e.code().map(excerpt_str);
    let message = match (&code, e.message()) {
        (Some(code), Some(msg)) => format!("{code}: {}", excerpt_str(msg)),
        (Some(code), None) => code.clone(),
        _ => excerpt_with(Chain(&e).to_string().as_bytes(), 1000),
    };
    hypercloud_cloudprovider::Error::Cloud {
        provider: PROVIDER_NAME.into(),
        operation: operation.into(),
        status,
        request_id,
        source: Box::new(Api { code, message }),
    }
}

fn body_request_id(body: &str) -> Option<String> {
    ["<RequestID>", "<RequestId>"].iter().find_map(|open| {
        let start = body.find(open)? + open.len();
        let end = body[start..].find('<')? + start;
        Some(body[start..end].trim().to_owned()).filter(|r| !r.is_empty())
    })
}

/// The AWS error code of a contract error made by [`sdk`], if any.
pub(crate) fn code(e: &hypercloud_cloudprovider::Error) -> Option<&str> {
    match e {
        hypercloud_cloudprovider::Error::Cloud { source, .. } => {
            source.downcast_ref::<Api>()?.code.as_deref()
        }
        _ => None,
    }
}

/// `Ok(None)` for an error whose AWS code is one of `codes` (a resource that does not exist).
pub(crate) fn absent<T>(
    r: hypercloud_cloudprovider::Result<T>,
    codes: &[&str],
) -> hypercloud_cloudprovider::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if code(&e).is_some_and(|c| codes.contains(&c)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Any other failure of an AWS call (a response that lacks a field the provider needs).
pub(crate) fn cloud(
    operation: &str,
    message: impl Into<String>,
) -> hypercloud_cloudprovider::Error {
    hypercloud_cloudprovider::Error::cloud(PROVIDER_NAME, operation, message)
}

#[cfg(test)]
mod tests {
    #[test]
    fn request_ids_from_error_bodies() {
        let ec2 = "<Response><Errors><Error><Code>X</Code></Error></Errors><RequestID>r-1</RequestID></Response>";
        assert_eq!(super::body_request_id(ec2).as_deref(), Some("r-1"));
        let elb = "<ErrorResponse><Error/><RequestId>r-2</RequestId></ErrorResponse>";
        assert_eq!(super::body_request_id(elb).as_deref(), Some("r-2"));
        assert_eq!(super::body_request_id("<RequestId></RequestId>"), None);
    }
}
