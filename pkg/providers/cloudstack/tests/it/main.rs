//! Integration tests of the cloudstack provider against the local cloud's CloudStack dialect.
