//! Not yet implemented: runs nothing.
pub(crate) async fn run(
    _c: std::sync::Arc<crate::Context>,
    _n: std::sync::Arc<crate::informer::Informer<k8s_openapi::api::core::v1::Node>>,
) -> crate::Result<()> {
    Ok(())
}
