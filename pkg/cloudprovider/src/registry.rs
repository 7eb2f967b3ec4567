//! Name → factory registry of providers (upstream `plugins.go`).
//!
//! The binary registers every compiled-in provider once at start-up; each personality then
//! calls [`Registry::init`] with its `--cloud-provider` and `--cloud-config`. As upstream, an
//! empty name means "no provider" and `external` means "the cloud-controller-manager does
//! the cloud work", so neither is an error here; the caller decides what it needs.
//!
//! Each personality also says which [`Layout`] it plays, and the factory receives it: upstream
//! shipped two different programs for some clouds (the legacy in-tree OpenStack provider and
//! the OpenStack cloud-controller-manager name load balancers differently), and hypercloud
//! reproduces the difference from this one value instead of comparing component names.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::{Error, Interface, Result};

/// The `--cloud-provider` value that moves cloud work to the cloud-controller-manager.
pub const EXTERNAL: &str = "external";

/// True for `external` (upstream `IsExternal`).
pub fn is_external(name: &str) -> bool {
    name == EXTERNAL
}

/// Which upstream layout a provider is built for.
///
/// Most providers behave the same in both; a provider whose upstream in-tree and external
/// implementations differ (OpenStack: load-balancer names, the Service annotations it
/// writes) reads it in its factory ([`Registry::register_layout_aware`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// Inside kube-controller-manager, the kubelet or kube-apiserver
    /// (`--cloud-provider=NAME`): the legacy in-tree provider's behaviour.
    #[default]
    InTree,
    /// Inside the cloud-controller-manager (the other components run with
    /// `--cloud-provider=external`): the external provider's behaviour.
    External,
}

impl Layout {
    /// `in-tree` or `external`, as printed in start-up reports.
    pub fn name(self) -> &'static str {
        match self {
            Layout::InTree => "in-tree",
            Layout::External => "external",
        }
    }
}

/// The bytes of a `--cloud-config` file and where they came from (for error messages).
#[derive(Clone, Debug)]
pub struct CloudConfig {
    /// File path or other origin, as shown to users.
    pub origin: String,
    /// The file's contents.
    pub bytes: Vec<u8>,
}

impl CloudConfig {
    /// Reads a config file; the error names the file.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes =
            crate::input::read_input_file(path).map_err(|source| Error::ReadCloudConfig {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Self {
            origin: path.display().to_string(),
            bytes,
        })
    }

    /// The contents as UTF-8; the error names the origin.
    pub fn text(&self, provider: &str) -> Result<&str> {
        std::str::from_utf8(&self.bytes).map_err(|e| Error::InvalidCloudConfig {
            provider: provider.into(),
            origin: self.origin.clone(),
            message: format!("not UTF-8 text: {e}"),
        })
    }
}

/// Builds a provider from its optional config (upstream `cloudprovider.Factory`) for the
/// [`Layout`] of the component that asks.
pub type Factory =
    Arc<dyn Fn(Option<&CloudConfig>, Layout) -> Result<Arc<dyn Interface>> + Send + Sync>;

struct Entry {
    description: String,
    deprecation: Option<String>,
    factory: Factory,
}

/// The providers compiled into this binary.
#[derive(Default)]
pub struct Registry {
    entries: BTreeMap<String, Entry>,
}

/// One registered provider, for listings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderInfo {
    /// Registered name.
    pub name: String,
    /// One-line description.
    pub description: String,
    /// Deprecation message, when the name is deprecated.
    pub deprecation: Option<String>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `factory` under `name`; the provider is the same in both layouts. A second
    /// registration of a name replaces the first and is reported (upstream treats it as a
    /// programming error).
    pub fn register(
        &mut self,
        name: &str,
        description: &str,
        factory: impl Fn(Option<&CloudConfig>) -> Result<Arc<dyn Interface>> + Send + Sync + 'static,
    ) {
        self.insert(
            name,
            description,
            None,
            Arc::new(move |config: Option<&CloudConfig>, _layout: Layout| factory(config)),
        );
    }

    /// Registers a factory that builds the provider for the asking component's [`Layout`].
    pub fn register_layout_aware(
        &mut self,
        name: &str,
        description: &str,
        factory: impl Fn(Option<&CloudConfig>, Layout) -> Result<Arc<dyn Interface>>
            + Send
            + Sync
            + 'static,
    ) {
        self.insert(name, description, None, Arc::new(factory));
    }

    /// Registers a deprecated name; using it still works but logs `message` as a warning.
    pub fn register_deprecated(
        &mut self,
        name: &str,
        description: &str,
        message: &str,
        factory: impl Fn(Option<&CloudConfig>) -> Result<Arc<dyn Interface>> + Send + Sync + 'static,
    ) {
        self.insert(
            name,
            description,
            Some(message.into()),
            Arc::new(move |config: Option<&CloudConfig>, _layout: Layout| factory(config)),
        );
    }

    fn insert(
        &mut self,
        name: &str,
        description: &str,
        deprecation: Option<String>,
        factory: Factory,
    ) {
        let old = self.entries.insert(
            name.into(),
            Entry {
                description: description.into(),
                deprecation,
                factory,
            },
        );
        if old.is_some() {
            tracing::error!(
                provider = name,
                "cloud provider registered twice; the last one wins"
            );
        }
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.entries.keys().map(String::as_str).collect()
    }

    /// Every registered provider with its description.
    pub fn list(&self) -> Vec<ProviderInfo> {
        self.entries
            .iter()
            .map(|(name, e)| ProviderInfo {
                name: name.clone(),
                description: e.description.clone(),
                deprecation: e.deprecation.clone(),
            })
            .collect()
    }

    /// Builds the named provider from `config` for `layout` (upstream `GetCloudProvider`);
    /// `Ok(None)` when no provider has that name.
    pub fn get(
        &self,
        name: &str,
        config: Option<&CloudConfig>,
        layout: Layout,
    ) -> Result<Option<Arc<dyn Interface>>> {
        match self.entries.get(name) {
            None => Ok(None),
            Some(entry) => (entry.factory)(config, layout).map(Some),
        }
    }

    /// Builds the provider a component playing `layout` was asked for (upstream
    /// `InitCloudProvider`).
    ///
    /// `""` → `Ok(None)` (no provider); `external` → `Ok(None)` (external mode); an unknown
    /// name → [`Error::UnknownProvider`] listing the known ones; an unreadable config →
    /// [`Error::ReadCloudConfig`]. Deprecated names log their deprecation message.
    pub fn init(
        &self,
        name: &str,
        config_path: Option<&Path>,
        layout: Layout,
    ) -> Result<Option<Arc<dyn Interface>>> {
        if name.is_empty() {
            tracing::info!("no cloud provider specified");
            return Ok(None);
        }
        if is_external(name) {
            tracing::info!("external cloud provider specified; cloud work is done by the cloud-controller-manager");
            return Ok(None);
        }
        let entry = self
            .entries
            .get(name)
            .ok_or_else(|| Error::UnknownProvider {
                name: name.into(),
                known: self.names().join(", "),
            })?;
        if let Some(message) = &entry.deprecation {
            tracing::warn!(
                provider = name,
                "WARNING: {name} cloud provider is deprecated: {message}"
            );
        }
        let config = config_path.map(CloudConfig::read).transpose()?;
        (entry.factory)(config.as_ref(), layout).map(Some)
    }
}

#[cfg(test)]
#[allow(clippy::err_expect)] // the Ok types are not Debug
mod tests {
    use super::*;
    use crate::fake::FakeCloud;
    use std::io::Write;

    fn registry() -> Registry {
        let mut r = Registry::new();
        r.register("fake", "in-memory", |c| {
            Ok(Arc::new(FakeCloud::from_cloud_config(c)?) as _)
        });
        r.register_deprecated("old-fake", "old name", "use fake", |c| {
            Ok(Arc::new(FakeCloud::from_cloud_config(c)?) as _)
        });
        r
    }

    #[test]
    fn empty_and_external_names_give_no_provider() {
        let r = registry();
        assert!(r
            .init("", None, Layout::InTree)
            .expect("empty is fine")
            .is_none());
        assert!(r
            .init("external", None, Layout::External)
            .expect("external is fine")
            .is_none());
        assert!(is_external("external"));
        assert!(!is_external("fake"));
    }

    #[test]
    fn unknown_name_lists_known_providers() {
        let err = registry()
            .init("nope", None, Layout::InTree)
            .err()
            .expect("must fail");
        let msg = err.to_string();
        assert!(matches!(err, Error::UnknownProvider { .. }));
        assert!(msg.contains("\"nope\""), "{msg}");
        assert!(msg.contains("fake, old-fake"), "{msg}");
    }

    #[test]
    fn missing_config_file_is_named() {
        let err = registry()
            .init(
                "fake",
                Some(Path::new("/nonexistent/cloud.yaml")),
                Layout::InTree,
            )
            .err()
            .expect("must fail");
        assert!(err.to_string().contains("/nonexistent/cloud.yaml"), "{err}");
        assert!(matches!(err, Error::ReadCloudConfig { .. }));
    }

    #[test]
    fn init_reads_config_and_builds_provider() {
        let mut f = tempfile::NamedTempFile::new().expect("tempfile");
        writeln!(f, "region: r9\ninstances: []").expect("write");
        let cloud = registry()
            .init("fake", Some(f.path()), Layout::InTree)
            .expect("valid")
            .expect("provider");
        assert_eq!(cloud.provider_name(), "fake");
    }

    #[test]
    fn deprecated_name_still_works_and_is_listed_as_deprecated() {
        let r = registry();
        assert!(r
            .init("old-fake", None, Layout::InTree)
            .expect("works")
            .is_some());
        let info = r.list();
        assert_eq!(info[1].deprecation.as_deref(), Some("use fake"));
        assert_eq!(info[0].deprecation, None);
    }

    #[test]
    fn layout_aware_factories_get_the_asking_components_layout() {
        let mut r = registry();
        struct Named(Layout);
        impl Interface for Named {
            fn provider_name(&self) -> &str {
                self.0.name()
            }
        }
        r.register_layout_aware("by-layout", "names itself after its layout", |_, layout| {
            Ok(Arc::new(Named(layout)) as _)
        });
        let name = |layout| {
            r.init("by-layout", None, layout)
                .expect("builds")
                .expect("provider")
                .provider_name()
                .to_owned()
        };
        assert_eq!(name(Layout::InTree), "in-tree");
        assert_eq!(name(Layout::External), "external");
        assert_eq!(Layout::default(), Layout::InTree);
    }

    #[test]
    fn get_unknown_is_none() {
        assert!(registry()
            .get("nope", None, Layout::External)
            .expect("no error")
            .is_none());
    }
}
