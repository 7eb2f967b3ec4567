//! placeholder
use crate::Result;
pub(crate) fn cluster_cidrs(_s: &str) -> Result<()> {
    Ok(())
}
pub(crate) async fn run(
    _c: std::sync::Arc<crate::Context>,
    _n: std::sync::Arc<crate::informer::Informer<k8s_openapi::api::core::v1::Node>>,
) -> Result<()> {
    Ok(())
}
