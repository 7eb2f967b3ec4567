//! hypercloud-localcloud (work in progress).
