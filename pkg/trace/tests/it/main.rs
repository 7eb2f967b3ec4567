//! Integration tests of the trace view (`hypercloud trace serve`) against the real apiserver.
//! One test binary (`tests/it/`), as every crate has.

mod serve;
