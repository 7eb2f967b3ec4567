//! hypercloud-options (work in progress).
