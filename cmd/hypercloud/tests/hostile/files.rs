//! See main.rs.
