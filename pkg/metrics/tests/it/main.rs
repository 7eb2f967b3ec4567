//! Integration tests of the admin server's TLS flags. One test binary (`tests/it/`), as every
//! crate has.

mod tls_flags;
