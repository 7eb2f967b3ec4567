//! hypercloud-testenv (work in progress).
