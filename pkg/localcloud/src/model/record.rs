//! The one trait every stored record implements, whatever its service or dialect: where it is
//! stored ([`Record::TABLE`], keyed by [`Record::key`]), what it is called in paths, bodies and
//! messages ([`Names`]), what a lookup of a missing one answers ([`NotFound`]), which of its
//! fields a list filter may answer from the store's index ([`Record::INDEXED`]) and its common
//! [`Meta`]. The API's generic list/show/delete, the data plane and the metadata servers read
//! records through it. Upstream equivalent: the SQLAlchemy declarative base every model of
//! Neutron, Octavia and Nova derives from.

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::Meta;
use crate::store::{Read, Tx};

/// What a kind of record is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Names {
    /// The body key of one record (`network`, `loadbalancer`, `server`).
    pub one: &'static str,
    /// The body key of a list (`networks`, `loadbalancers`, `servers`).
    pub many: &'static str,
    /// How messages name it (`Network`, `Load Balancer`, `Instance`).
    pub title: &'static str,
}

/// A lookup of a record that does not exist. The API answers it as a 404 with `kind` as the
/// error type (Neutron's `NetworkNotFound`, Nova's `itemNotFound`) and `message` as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct NotFound {
    pub kind: &'static str,
    pub message: String,
}

/// One kind of stored record.
pub(crate) trait Record: Serialize + DeserializeOwned {
    /// The store table.
    const TABLE: &'static str;
    /// What it is called in paths, bodies and messages.
    const NAMES: Names;
    /// The error type a missing record answers with.
    const NOT_FOUND: &'static str;
    /// Filters a list may answer from the store's index: attributes the record stores as its
    /// view shows them (the index narrows the candidates; the view filter still decides).
    const INDEXED: &'static [&'static str] = &["id", "name", "project_id"];

    fn meta(&self) -> &Meta;
    fn meta_mut(&mut self) -> &mut Meta;

    /// The record's key in its table: its ID unless the kind keys otherwise (GCE: scope/name).
    fn key(&self) -> Cow<'_, str> {
        Cow::Borrowed(&self.meta().id)
    }

    fn id(&self) -> &str {
        &self.meta().id
    }

    /// The error for a missing `key`: "`<Title> <key> could not be found.`" unless the dialect
    /// words it otherwise.
    fn not_found(key: &str) -> NotFound {
        NotFound {
            kind: Self::NOT_FOUND,
            message: format!("{} {key} could not be found.", Self::NAMES.title),
        }
    }

    /// Records a change: updated now, next revision ([`Meta::touch`]).
    fn touch(&mut self) {
        self.meta_mut().touch();
    }

    /// The record stored under `key`, if any.
    fn get(r: &impl Read, key: &str) -> Option<Self> {
        r.get::<Self>(Self::TABLE, key)
    }

    /// The record stored under `key`, or [`Record::not_found`].
    fn find(r: &impl Read, key: &str) -> Result<Self, NotFound> {
        Self::get(r, key).ok_or_else(|| Self::not_found(key))
    }

    /// Every record of the kind.
    fn list(r: &impl Read) -> Vec<Self> {
        r.list::<Self>(Self::TABLE)
    }

    /// The records whose indexed `field` is (or holds) `value`.
    fn list_where(r: &impl Read, field: &str, value: &str) -> Vec<Self> {
        r.list_where::<Self>(Self::TABLE, field, value)
    }

    /// Creates or replaces the record under its key.
    fn put(&self, tx: &mut Tx<'_>) -> crate::Result<()> {
        tx.put(Self::TABLE, &self.key(), self)
    }

    /// Deletes the record stored under `key`; whether it existed.
    fn delete(tx: &mut Tx<'_>, key: &str) -> bool {
        tx.delete(Self::TABLE, key)
    }
}

/// Implements [`Record`] for a record struct: `Type: TABLE, (one, many, title), not-found error
/// type`, then optionally its indexed fields and further items (an override of
/// [`Record::not_found`]). `Type [common.meta]: ...` names where its [`Meta`] is when it is not
/// the field `meta`.
macro_rules! impl_record {
    ($t:ty: $table:expr, ($one:expr, $many:expr, $title:expr), $not_found:expr
        $(, $indexed:expr)? $(,)? $(; $($item:item)*)?) => {
        $crate::model::impl_record!(
            $t [meta]: $table, ($one, $many, $title), $not_found $(, $indexed)? $(; $($item)*)?
        );
    };
    ($t:ty [$($meta:ident).+]: $table:expr, ($one:expr, $many:expr, $title:expr), $not_found:expr
        $(, $indexed:expr)? $(,)? $(; $($item:item)*)?) => {
        impl $crate::model::Record for $t {
            const TABLE: &'static str = $table;
            const NAMES: $crate::model::Names = $crate::model::Names {
                one: $one,
                many: $many,
                title: $title,
            };
            const NOT_FOUND: &'static str = $not_found;
            $(const INDEXED: &'static [&'static str] = $indexed;)?
            fn meta(&self) -> &$crate::model::Meta {
                &self.$($meta).+
            }
            fn meta_mut(&mut self) -> &mut $crate::model::Meta {
                &mut self.$($meta).+
            }
            $($($item)*)?
        }
    };
}
pub(crate) use impl_record;
